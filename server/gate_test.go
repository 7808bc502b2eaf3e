package server

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"nacos-lockd/gateway/admin"
	"nacos-lockd/gateway/admin/adminapi"
	"nacos-lockd/statemachine"
	"nacos-lockd/storage/storagetest"
)

type fakeGateNode struct {
	level    int
	members  map[uint64]string
	proposed []int
}

func (f *fakeGateNode) IsLeader() bool    { return true }
func (f *fakeGateNode) ReplicaID() uint64 { return 1 }
func (f *fakeGateNode) Membership(context.Context) (map[uint64]string, error) {
	return f.members, nil
}
func (f *fakeGateNode) ClusterLevel() int { return f.level }
func (f *fakeGateNode) ProposeLevel(_ context.Context, l int) error {
	f.proposed = append(f.proposed, l)
	f.level = max(f.level, l)
	return nil
}

// The leader raises the level only once every member of the membership
// advertises it; a member at the baseline or one that does not answer
// holds it back.
func TestVersionGateRaisesOnlyWhenEveryMemberReads(t *testing.T) {
	node := &fakeGateNode{level: statemachine.LevelBaseline, members: map[uint64]string{1: "127.0.0.1:7848", 2: "127.0.0.1:7849", 3: "127.0.0.1:7850"}}
	g := newVersionGate(node, newPeerDirectory(nil, false, [2]string{}, nil), [2]string{"test", "abc"}, zerolog.Nop())
	answers := map[string]adminapi.MemberVersion{}
	g.version = func(_ context.Context, m admin.Member) adminapi.MemberVersion {
		v := answers[m.Address]
		v.ReplicaID, v.Address = m.ReplicaID, m.Address
		return v
	}
	at := func(level int) adminapi.MemberVersion { return adminapi.MemberVersion{Advertised: true, Level: level} }
	check := func() {
		t.Helper()
		if err := g.check(context.Background()); err != nil {
			t.Fatal(err)
		}
	}

	answers["127.0.0.1:8849"] = at(statemachine.MaxLevel)
	answers["127.0.0.1:8850"] = adminapi.MemberVersion{Level: statemachine.LevelBaseline} // 404: an old build
	check()
	if len(node.proposed) != 0 {
		t.Fatalf("proposed %v with a baseline member", node.proposed)
	}
	answers["127.0.0.1:8850"] = adminapi.MemberVersion{} // no answer: unknown
	check()
	if len(node.proposed) != 0 {
		t.Fatalf("proposed %v with a member that did not answer", node.proposed)
	}
	answers["127.0.0.1:8850"] = at(statemachine.MaxLevel)
	check()
	if len(node.proposed) != 1 || node.proposed[0] != statemachine.MaxLevel {
		t.Fatalf("proposed %v once every member upgraded, want [%d]", node.proposed, statemachine.MaxLevel)
	}
	check() // at the level already: nothing more
	if len(node.proposed) != 1 {
		t.Fatalf("proposed again: %v", node.proposed)
	}
	// The leader's advertisement shows the poll.
	v := g.advertised()
	if v.ClusterLevel != statemachine.MaxLevel || v.Reads.Level != statemachine.MaxLevel || len(v.Members) != 3 || !v.Members[0].Advertised {
		t.Fatalf("advertised %+v", v)
	}
}

// What a member answers decides how the gate counts it: an advertisement
// at its level, a 404 (a build without the gate) at the baseline,
// anything else not at all.
func TestVersionGatePollsSeldomOnceSettled(t *testing.T) {
	node := &fakeGateNode{level: statemachine.LevelBaseline}
	g := newVersionGate(node, nil, [2]string{}, zerolog.Nop())
	for tick := range 2 * settledPolls {
		if !g.pollDue(tick) {
			t.Fatalf("below this build's level, tick %d is skipped", tick)
		}
	}
	node.level = statemachine.MaxLevel
	due := 0
	for tick := range 3 * settledPolls {
		if g.pollDue(tick) {
			due++
		}
	}
	if due != 3 {
		t.Fatalf("at this build's level, %d polls in %d ticks, want 3", due, 3*settledPolls)
	}
}

func TestMemberVersion(t *testing.T) {
	var status int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/cluster/version" || r.Header.Get("X-Identity") != "peer" {
			t.Errorf("request %s, identity %q", r.URL.Path, r.Header.Get("X-Identity"))
		}
		if status != 200 {
			w.WriteHeader(status)
			return
		}
		_ = json.NewEncoder(w).Encode(adminapi.Version{Build: "v9", Reads: adminapi.Versions{Level: 7}})
	}))
	defer srv.Close()
	d := newPeerDirectory(nil, false, [2]string{"X-Identity", "peer"}, nil)
	m := admin.Member{ReplicaID: 5, Address: strings.TrimPrefix(srv.URL, "http://")}
	for _, c := range []struct {
		status, level int
		advertised    bool
	}{{200, 7, true}, {404, statemachine.LevelBaseline, false}, {403, 0, false}, {500, 0, false}} {
		status = c.status
		v := d.memberVersion(context.Background(), m)
		if v.Level != c.level || v.Advertised != c.advertised || v.ReplicaID != 5 {
			t.Errorf("status %d: %+v", c.status, v)
		}
	}
	srv.Close()
	if v := d.memberVersion(context.Background(), m); v.Level != 0 || v.Error == "" {
		t.Errorf("unreachable member: %+v", v)
	}
}

// nacos-lockctl vouches for a node of its own release with the level in
// adminapi; it must be what this build reads.
func TestBuildLevelMatches(t *testing.T) {
	if adminapi.BuildLevel != statemachine.MaxLevel || admin.BaselineLevel != statemachine.LevelBaseline {
		t.Fatalf("adminapi.BuildLevel %d, admin.BaselineLevel %d; statemachine: MaxLevel %d, LevelBaseline %d",
			adminapi.BuildLevel, admin.BaselineLevel, statemachine.MaxLevel, statemachine.LevelBaseline)
	}
}

func TestStartRefusesAnUnreadableStoredLevel(t *testing.T) {
	db := storagetest.OpenInMemory(t)
	if err := checkStoredLevel(db); err != nil {
		t.Fatalf("empty store: %v", err)
	}
	b := db.NewBatch()
	b.Set([]byte("m/level"), binary.BigEndian.AppendUint64(nil, statemachine.MaxLevel+1)) // statemachine's meta encoding
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := checkStoredLevel(db); err == nil || !strings.Contains(err.Error(), "a cluster level never falls") {
		t.Fatalf("stored level above this build's: %v", err)
	}
}
