package admin

import (
	"net/http/pprof"
)

// addProfileRoutes serves Go's runtime profiles under /debug/pprof/, the
// paths `go tool pprof` and `go tool trace` expect: the index, every
// named profile (heap, allocs, goroutine, mutex, block, threadcreate)
// with ?debug= and ?seconds= as the runtime takes them, a CPU profile
// (profile?seconds=N) and an execution trace (trace?seconds=N). They are
// guarded like the /v1 routes: a profile shows the process's memory, and
// a CPU profile or trace costs CPU for as long as it runs.
//
// The handlers are net/http/pprof's own, mounted on our mux; importing
// that package also registers them on http.DefaultServeMux, which
// nothing in this process serves.
func (s *Server) addProfileRoutes() {
	s.mux.HandleFunc("GET /debug/pprof/", s.admin(pprof.Index))
	s.mux.HandleFunc("GET /debug/pprof/cmdline", s.admin(pprof.Cmdline))
	s.mux.HandleFunc("GET /debug/pprof/profile", s.admin(pprof.Profile))
	s.mux.HandleFunc("GET /debug/pprof/symbol", s.admin(pprof.Symbol))
	s.mux.HandleFunc("POST /debug/pprof/symbol", s.admin(pprof.Symbol))
	s.mux.HandleFunc("GET /debug/pprof/trace", s.admin(pprof.Trace))
}
