package statemachine

import (
	"testing"

	"nacos-lockd/internal/depcheck"
)

// TestImports keeps the table deterministic and free of the replication
// layer: no Raft, no storage engine, no gRPC, logger or metrics anywhere in
// its dependencies, and no clock or randomness among its own imports (every
// time comes from a command, see DESIGN.md, Time).
func TestImports(t *testing.T) {
	depcheck.Check(t, depcheck.Rule{
		Pattern: ".",
		Forbidden: []string{
			"github.com/lni/", "github.com/dgraph-io/", "github.com/cockroachdb/pebble",
			"google.golang.org/grpc", "github.com/rs/zerolog", "github.com/prometheus/",
			"nacos-lockd/storage", "nacos-lockd/replica", "nacos-lockd/gateway", "nacos-lockd/protocol",
		},
	})
	for _, imp := range depcheck.List(t, "-f", "{{join .Imports \" \"}}", ".") {
		switch imp {
		case "time", "math/rand", "math/rand/v2", "crypto/rand", "os":
			t.Errorf("statemachine imports %s: apply must read nothing but the entries", imp)
		}
	}
}
