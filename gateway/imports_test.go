package gateway

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps the front end off the replication layer: the gateway
// and its subpackages (admin, auth) reach the lock table only through the
// interfaces they declare (Table, admin.Locks, admin.Cluster), so nothing
// of Raft or the storage engine may be among their dependencies.
func TestImports(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", "./...").Output()
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
		"nacos-lockd/replica", "nacos-lockd/storage", "nacos-lockd/compat",
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("gateway depends on %s", dep)
			}
		}
	}
}
