package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps the CLI a client: it decodes the admin API into the
// server's own JSON types (gateway/admin/adminapi) and reads lockview's
// page limits, and neither may bring the server in with them.
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
	allowed := map[string]bool{"nacos-lockd/gateway/admin/adminapi": true, "nacos-lockd/statemachine/lockview": true}
	forbidden := []string{
		"github.com/lni/", "github.com/dgraph-io/", "github.com/prometheus/", "github.com/rs/zerolog",
		"nacos-lockd/gateway", "nacos-lockd/statemachine", "nacos-lockd/replica", "nacos-lockd/storage", "nacos-lockd/control",
	}
	for _, dep := range deps {
		if allowed[dep] {
			continue
		}
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("nacos-lockctl depends on %s", dep)
			}
		}
	}
}
