package gateway

import (
	"testing"

	"nacos-lockd/internal/depcheck"
)

// TestImports keeps the front end off the replication layer: the gateway
// and its subpackages (admin, auth) reach the lock table only through the
// interfaces they declare (Table, admin.Locks, admin.Cluster), so nothing
// of Raft or the storage engine may be among their dependencies.
func TestImports(t *testing.T) {
	depcheck.Check(t, depcheck.Rule{
		Pattern: "./...",
		Forbidden: []string{
			"github.com/lni/",               // dragonboat
			"github.com/dgraph-io/",         // badger
			"github.com/cockroachdb/pebble", // dragonboat's log store
			"nacos-lockd/replica", "nacos-lockd/storage", "nacos-lockd/compat",
		},
	})
}
