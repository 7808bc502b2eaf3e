package main

import (
	"testing"

	"nacos-lockd/internal/depcheck"
)

// TestImports keeps the CLI a client: it decodes the admin API into the
// server's own JSON types (gateway/admin/adminapi) and reads lockview's
// page limits, and neither may bring the server in with them.
func TestImports(t *testing.T) {
	depcheck.Check(t, depcheck.Rule{
		Pattern: ".",
		Forbidden: []string{
			"github.com/lni/", "github.com/dgraph-io/", "github.com/prometheus/", "github.com/rs/zerolog",
			"nacos-lockd/gateway", "nacos-lockd/statemachine", "nacos-lockd/replica", "nacos-lockd/storage", "nacos-lockd/control",
		},
		Allowed: []string{"nacos-lockd/gateway/admin/adminapi", "nacos-lockd/statemachine/lockview"},
	})
}
