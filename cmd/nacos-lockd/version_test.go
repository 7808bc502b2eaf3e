package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"nacos-lockd/interop/procs"
)

// TestVersionFlag builds the binary with the version, commit and date
// stamped by -ldflags -X, as `make release` and `make build` do, and checks
// that --version prints exactly those; a build without them prints "dev".
// The build is otherwise the one procs builds (no -trimpath, no
// CGO_ENABLED=0), so it reuses those compiled packages and costs a link.
func TestVersionFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	stamped := filepath.Join(dir, "stamped")
	ldflags := "-X main.version=v9.8.7-test -X main.commit=0123abcd -X main.buildDate=2026-12-01T10:00:00Z"
	build := exec.Command("go", "build", "-ldflags", ldflags, "-o", stamped, "nacos-lockd/cmd/nacos-lockd")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(stamped, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("--version: %v\n%s", err, out)
	}
	want := "nacos-lockd v9.8.7-test (commit 0123abcd, built 2026-12-01T10:00:00Z, go"
	if !strings.HasPrefix(string(out), want) || strings.Count(string(out), "\n") != 1 {
		t.Fatalf("--version printed %q, want one line starting %q", out, want)
	}

	// -version (Go's single dash) and flags beside it do not start a server.
	out, err = exec.Command(stamped, "--port", "1", "-version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "nacos-lockd v9.8.7-test ") {
		t.Fatalf("-version with other flags: %v %q", err, out)
	}

	out, err = exec.Command(procs.Binary(t, "nacos-lockd"), "--version").CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "nacos-lockd dev (commit ") {
		t.Fatalf("unstamped --version: %v %q", err, out)
	}
}
