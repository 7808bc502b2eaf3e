package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
)

// fakeCluster is a map-backed membership with a settable leader.
type fakeCluster struct {
	self, leader uint64
	members      map[uint64]string
	removed      map[uint64]bool
	fail         error
}

func (f *fakeCluster) ReplicaID() uint64 { return f.self }
func (f *fakeCluster) LeaderID() (uint64, bool) {
	return f.leader, f.leader != 0
}
func (f *fakeCluster) Membership(context.Context) (map[uint64]string, error) {
	out := map[uint64]string{}
	for k, v := range f.members {
		out[k] = v
	}
	return out, f.fail
}
func (f *fakeCluster) AddReplica(_ context.Context, id uint64, addr string) error {
	if f.removed[id] {
		return errors.New("replica id was removed before")
	}
	f.members[id] = addr
	return f.fail
}
func (f *fakeCluster) RemoveReplica(_ context.Context, id uint64) error {
	delete(f.members, id)
	f.removed[id] = true
	return f.fail
}

func newTestAPI(t *testing.T) (*fakeCluster, http.Handler, *bool) {
	t.Helper()
	fc := &fakeCluster{self: 1, leader: 1, members: map[uint64]string{1: "127.0.0.1:7848", 2: "127.0.0.1:7850"}, removed: map[uint64]bool{}}
	ready := false
	next := uint64(100)
	api := New(Config{
		Resolve: func(a string) (Member, error) {
			var ip string
			var port int
			if _, err := fmt.Sscanf(strings.Replace(a, ":", " ", 1), "%s %d", &ip, &port); err != nil {
				return Member{}, fmt.Errorf("bad address %q", a)
			}
			return Member{Address: a, RaftAddress: fmt.Sprintf("%s:%d", ip, port-1000)}, nil
		},
		NewReplicaID: func(Member, map[uint64]string) uint64 { next++; return next },
		Describe: func(id uint64, raft string) Member {
			var ip string
			var port int
			fmt.Sscanf(strings.Replace(raft, ":", " ", 1), "%s %d", &ip, &port)
			return Member{ReplicaID: id, Address: fmt.Sprintf("%s:%d", ip, port+1000), RaftAddress: raft}
		},
		Ready:   func() bool { return ready },
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "# metrics\n") }),
	}, fc, zerolog.Nop())
	return fc, api.Handler(), &ready
}

func do(t *testing.T, h http.Handler, method, path, body string) (int, map[string]any) {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out map[string]any
	_ = json.Unmarshal(rec.Body.Bytes(), &out)
	return rec.Code, out
}

func TestHealthAndReadiness(t *testing.T) {
	fc, h, ready := newTestAPI(t)
	if code, _ := do(t, h, "GET", "/healthz", ""); code != 200 {
		t.Fatalf("healthz %d", code)
	}
	if code, _ := do(t, h, "GET", "/readyz", ""); code != 503 {
		t.Fatalf("readyz before start: %d", code)
	}
	*ready = true
	if code, _ := do(t, h, "GET", "/readyz", ""); code != 200 {
		t.Fatalf("readyz when ready: %d", code)
	}
	fc.leader = 0
	if code, _ := do(t, h, "GET", "/readyz", ""); code != 503 {
		t.Fatalf("readyz without a leader: %d", code)
	}
	if code, _ := do(t, h, "GET", "/metrics", ""); code != 200 {
		t.Fatalf("metrics %d", code)
	}
}

func TestMembership(t *testing.T) {
	fc, h, _ := newTestAPI(t)
	code, out := do(t, h, "GET", "/v1/cluster/members", "")
	if code != 200 || len(out["members"].([]any)) != 2 {
		t.Fatalf("list: %d %v", code, out)
	}
	first := out["members"].([]any)[0].(map[string]any)
	if first["address"] != "127.0.0.1:8848" || first["role"] != "leader" || first["self"] != true {
		t.Fatalf("first member %v", first)
	}
	code, out = do(t, h, "POST", "/v1/cluster/members", `{"address":"127.0.0.1:8852"}`)
	if code != 200 || out["replicaId"].(float64) != 101 || fc.members[101] != "127.0.0.1:7852" {
		t.Fatalf("add: %d %v %v", code, out, fc.members)
	}
	// Adding again is idempotent; replacing gives a new id.
	if code, out = do(t, h, "POST", "/v1/cluster/members", `{"address":"127.0.0.1:8852"}`); code != 200 || out["replicaId"].(float64) != 101 {
		t.Fatalf("add again: %d %v", code, out)
	}
	if code, out = do(t, h, "POST", "/v1/cluster/members", `{"address":"127.0.0.1:8852","replace":true}`); code != 200 || out["replicaId"].(float64) != 102 || !fc.removed[101] {
		t.Fatalf("replace: %d %v", code, out)
	}
	if code, _ = do(t, h, "DELETE", "/v1/cluster/members/127.0.0.1:8852", ""); code != 200 || fc.members[102] != "" {
		t.Fatalf("remove: %d %v", code, fc.members)
	}
	if code, _ = do(t, h, "DELETE", "/v1/cluster/members/127.0.0.1:8852", ""); code != 404 {
		t.Fatalf("remove non-member: %d", code)
	}
	for _, body := range []string{`nope`, `{"address":"bad"}`, strings.Repeat("x", 10000)} {
		if code, _ = do(t, h, "POST", "/v1/cluster/members", body); code/100 != 4 {
			t.Fatalf("bad add %q: %d", body[:min(len(body), 20)], code)
		}
	}
	fc.fail = errors.New("no quorum")
	if code, out = do(t, h, "GET", "/v1/cluster/members", ""); code != 503 || !strings.Contains(out["error"].(string), "no quorum") {
		t.Fatalf("unavailable: %d %v", code, out)
	}
}

func TestRuntimeLogLevel(t *testing.T) {
	_, h, _ := newTestAPI(t)
	old := zerolog.GlobalLevel()
	defer zerolog.SetGlobalLevel(old)
	if code, out := do(t, h, "PUT", "/v1/log/level", `{"level":"debug"}`); code != 200 || out["level"] != "debug" || zerolog.GlobalLevel() != zerolog.DebugLevel {
		t.Fatalf("set: %d %v", code, out)
	}
	if code, out := do(t, h, "GET", "/v1/log/level", ""); code != 200 || out["level"] != "debug" {
		t.Fatalf("get: %d %v", code, out)
	}
	if code, _ := do(t, h, "PUT", "/v1/log/level", `{"level":"loud"}`); code != 400 {
		t.Fatalf("bad level: %d", code)
	}
}
