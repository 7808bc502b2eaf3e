package protocol

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps protocol a leaf: shared by the server, test clients and
// the load tool, it must not pull in any other package of ours, nor a logger,
// metrics, Raft or storage.
func TestImports(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}}", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := map[string]bool{"nacos-lockd/protocol": true, "nacos-lockd/protocol/pb": true}
	forbidden := []string{"github.com/rs/zerolog", "github.com/prometheus/", "github.com/lni/", "github.com/dgraph-io/"}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list printed nothing")
	}
	for _, dep := range deps {
		if (dep == "nacos-lockd" || strings.HasPrefix(dep, "nacos-lockd/")) && !allowed[dep] {
			t.Errorf("protocol depends on %s", dep)
		}
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("protocol depends on %s", dep)
			}
		}
	}
}
