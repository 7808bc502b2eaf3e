package statemachine

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImports keeps the table deterministic and free of the replication
// layer: no Raft, no storage engine, no gRPC, logger or metrics anywhere in
// its dependencies, and no clock or randomness among its own imports (every
// time comes from a command, see DESIGN.md, Time).
func TestImports(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go tool not in PATH")
	}
	deps := goList(t, goTool, "-deps", "-f", "{{.ImportPath}}", ".")
	forbidden := []string{
		"github.com/lni/", "github.com/dgraph-io/", "github.com/cockroachdb/pebble",
		"google.golang.org/grpc", "github.com/rs/zerolog", "github.com/prometheus/",
		"nacos-lockd/storage", "nacos-lockd/replica", "nacos-lockd/gateway", "nacos-lockd/protocol",
	}
	for _, dep := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(dep, f) {
				t.Errorf("statemachine depends on %s", dep)
			}
		}
	}
	for _, imp := range goList(t, goTool, "-f", "{{join .Imports \" \"}}", ".") {
		switch imp {
		case "time", "math/rand", "math/rand/v2", "crypto/rand", "os":
			t.Errorf("statemachine imports %s: apply must read nothing but the entries", imp)
		}
	}
}

func goList(t *testing.T, goTool string, args ...string) []string {
	t.Helper()
	out, err := exec.Command(goTool, append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		t.Fatal("go list printed nothing")
	}
	return fields
}
