// Package depcheck lets a package's tests say what the package must never
// depend on (Raft, storage, the server...), so that a layering decision
// fails a test the day an import breaks it instead of being found in a
// review. It runs `go list` on the package under test.
package depcheck

import (
	"os/exec"
	"strings"
	"testing"
)

// List runs `go list args...` in the test's directory (its package) and
// returns the fields it prints; it fails t if go list fails or prints
// nothing. go test puts its own go tool first in PATH.
func List(t testing.TB, args ...string) []string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go tool: %v", err)
	}
	out, err := exec.Command(goTool, append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list %s: %v", strings.Join(args, " "), err)
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		t.Fatalf("go list %s printed nothing", strings.Join(args, " "))
	}
	return fields
}

// Rule is what the packages matched by Pattern (relative to the test's
// package: "." or "./...") must not depend on: any import path starting
// with one of Forbidden, except the paths in Allowed.
type Rule struct {
	Pattern   string
	Forbidden []string
	Allowed   []string
}

// Check fails t for every dependency of the rule's packages that it
// forbids, naming it.
func Check(t testing.TB, r Rule) {
	t.Helper()
	for _, dep := range List(t, "-deps", "-f", "{{.ImportPath}}", r.Pattern) {
		if forbids(r, dep) {
			t.Errorf("%s depends on %s", r.Pattern, dep)
		}
	}
}

func forbids(r Rule, dep string) bool {
	for _, a := range r.Allowed {
		if dep == a {
			return false
		}
	}
	for _, f := range r.Forbidden {
		if strings.HasPrefix(dep, f) {
			return true
		}
	}
	return false
}
