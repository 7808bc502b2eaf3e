package protocol

import (
	"testing"

	"nacos-lockd/internal/depcheck"
)

// TestImports keeps protocol a leaf: shared by the server, test clients and
// the load tool, it must not pull in any other package of ours, nor a logger,
// metrics, Raft or storage.
func TestImports(t *testing.T) {
	depcheck.Check(t, depcheck.Rule{
		Pattern:   ".",
		Forbidden: []string{"nacos-lockd", "github.com/rs/zerolog", "github.com/prometheus/", "github.com/lni/", "github.com/dgraph-io/"},
		Allowed:   []string{"nacos-lockd/protocol", "nacos-lockd/protocol/pb"},
	})
}
