package admin

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"nacos-lockd/gateway/admin/adminapi"
)

// The version gate at join time: a member that cannot read the cluster's
// level is refused before Raft knows it, with a message that says why;
// one that can is added.
func TestJoinRefusedBelowTheClusterLevel(t *testing.T) {
	fc := &fakeCluster{self: 1, leader: 1, members: map[uint64]string{1: "127.0.0.1:7848"}, removed: map[uint64]bool{}}
	level := 1
	next := uint64(100)
	api := New(Config{
		Resolve: func(a string) (Member, error) {
			var port int
			if _, err := fmt.Sscanf(strings.TrimPrefix(a, "127.0.0.1:"), "%d", &port); err != nil {
				return Member{}, err
			}
			return Member{Address: a, RaftAddress: fmt.Sprintf("127.0.0.1:%d", port-1000)}, nil
		},
		NewReplicaID: func(Member, map[uint64]string) uint64 { next++; return next },
		Describe:     func(id uint64, raft string) Member { return Member{ReplicaID: id, RaftAddress: raft} },
		Version: func() adminapi.Version {
			return adminapi.Version{Build: "test", Reads: adminapi.Versions{Level: 2}, ClusterLevel: level}
		},
	}, fc, zerolog.Nop())
	h := api.Handler()

	code, out := do(t, h, "GET", "/v1/cluster/version", "")
	if code != 200 || out["clusterLevel"].(float64) != 1 || out["reads"].(map[string]any)["level"].(float64) != 2 {
		t.Fatalf("GET /v1/cluster/version: %d %v", code, out)
	}
	// At the baseline anyone joins, also a build that does not say what it
	// reads.
	if code, out = do(t, h, "POST", "/v1/cluster/members", `{"address":"127.0.0.1:8850","replace":true}`); code != 200 {
		t.Fatalf("join at the baseline: %d %v", code, out)
	}
	level = 2
	for body, want := range map[string]string{
		`{"address":"127.0.0.1:8852","replace":true}`:           "counts as level 1",
		`{"address":"127.0.0.1:8852","replace":true,"level":1}`: "reads up to level 1",
	} {
		code, out = do(t, h, "POST", "/v1/cluster/members", body)
		if msg, _ := out["error"].(string); code != 409 || !strings.Contains(msg, "cluster is at level 2") || !strings.Contains(msg, want) {
			t.Fatalf("join of %s at level 2: %d %v", body, code, out)
		}
	}
	if len(fc.members) != 2 {
		t.Fatalf("a refused joiner changed the membership: %v", fc.members)
	}
	if code, out = do(t, h, "POST", "/v1/cluster/members", `{"address":"127.0.0.1:8852","replace":true,"level":2}`); code != 200 || len(fc.members) != 3 {
		t.Fatalf("join of a build that reads the level: %d %v", code, out)
	}
}
