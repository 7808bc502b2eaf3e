package control

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps the control loops off the replication layer and the
// front end: they run against control.Table alone.
func TestImports(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list printed nothing")
	}
	forbidden := []string{
		"github.com/lni/",               // dragonboat
		"github.com/dgraph-io/",         // badger
		"github.com/cockroachdb/pebble", // dragonboat's log store
		"nacos-lockd/replica", "nacos-lockd/storage", "nacos-lockd/gateway",
		"google.golang.org/grpc",
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("control depends on %s", dep)
			}
		}
	}
}
