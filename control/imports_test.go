package control

import (
	"testing"

	"nacos-lockd/internal/depcheck"
)

// TestImports keeps the control loops off the replication layer and the
// front end: they run against control.Table alone.
func TestImports(t *testing.T) {
	depcheck.Check(t, depcheck.Rule{
		Pattern: ".",
		Forbidden: []string{
			"github.com/lni/",               // dragonboat
			"github.com/dgraph-io/",         // badger
			"github.com/cockroachdb/pebble", // dragonboat's log store
			"nacos-lockd/replica", "nacos-lockd/storage", "nacos-lockd/gateway",
			"google.golang.org/grpc",
		},
	})
}
