// Present so that the compiler accepts the body-less declarations in
// handoff_linux.go, which go:linkname binds to the runtime.
