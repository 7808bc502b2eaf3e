package replica

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"nacos-lockd/storage/storagetest"

	"nacos-lockd/statemachine"
)

// raiseLevel commits the gate's level entry, as the leader's version gate
// does once every member reads it.
func raiseLevel(t *testing.T, n *Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.ProposeLevel(ctx, statemachine.LevelGate); err != nil {
		t.Fatal(err)
	}
	if got := n.ClusterLevel(); got != statemachine.LevelGate {
		t.Fatalf("cluster level %d after its entry committed", got)
	}
}

// Below the gate's level a claim is not recorded (its CLAIM carries
// LeaseAtNow, which builds without the gate refuse), so the gateway claims
// through Raft; the level entry switches recording on, and the level
// survives a restart.
func TestNodeRecordsClaimsOnlyAtTheGateLevel(t *testing.T) {
	forEachEngine(t, testNodeRecordsClaimsOnlyAtTheGateLevel)
}

func testNodeRecordsClaimsOnlyAtTheGateLevel(t *testing.T, engine string) {
	env := &nodeEnv{engine: engine, dir: t.TempDir(), addr: freeAddr(t), window: 50 * time.Millisecond}
	n, db := env.start(t)
	now := time.Now().UnixMilli()
	if n.ClusterLevel() != statemachine.LevelBaseline {
		t.Fatalf("a new node at level %d", n.ClusterLevel())
	}
	claim := claimCmd(N, "k", "b", "c2", now, 60000, 1)
	claim.LeaseAtNow = true
	if _, err := n.Record(time.Now().Add(10*time.Second), claim); !errors.Is(err, ErrLevelTooLow) {
		t.Fatalf("record at the baseline level: %v, want ErrLevelTooLow", err)
	}
	// Other commands are proposed as before: the baseline reads them.
	if r := propose(t, n, acq(N, "k", "a", "c1", now, 60000, 0)); !r.Success() {
		t.Fatalf("acquire at the baseline: %+v", r)
	}
	raiseLevel(t, n)
	done, err := n.Record(time.Now().Add(10*time.Second), claim)
	if err != nil {
		t.Fatalf("record at the gate's level: %v", err)
	}
	// Committed and applied: refused, as a CLAIM of a grant that is not
	// there ("a" holds the lock), and Record says so.
	if err := <-done; !errors.Is(err, ErrRecordRefused) {
		t.Fatalf("record of a claim with no grant: %v, want ErrRecordRefused", err)
	}
	// Proposed again (a second leader's poll): the level stays.
	raiseLevel(t, n)
	n.Close()
	db.Close()

	n, db = env.start(t)
	defer db.Close()
	defer n.Close()
	if n.ClusterLevel() != statemachine.LevelGate {
		t.Fatalf("after a restart the node is at level %d", n.ClusterLevel())
	}
}

// A level entry above what this build reads stops the replica (Update
// fails, which halts it) instead of applying the entries after it as
// malformed.
func TestDiskSMStopsAtAnUnreadableLevel(t *testing.T) {
	db := storagetest.OpenInMemory(t)
	s := openSM(t, db, nil)
	var level atomic.Int64
	s.level = &level
	out := update(t, s, []sm.Entry{{Index: 1, Cmd: statemachine.EncodeLevel(statemachine.LevelGate)}})
	if r, err := statemachine.DecodeResult(out[0].Result.Data); err != nil || r.Code != statemachine.CodeOK || level.Load() != statemachine.LevelGate {
		t.Fatalf("level entry: %+v %v, level %d", r, err, level.Load())
	}
	out = update(t, s, []sm.Entry{{Index: 2, Cmd: statemachine.EncodeLevel(statemachine.LevelBaseline)}})
	if r, _ := statemachine.DecodeResult(out[0].Result.Data); r.Code != statemachine.CodeOK || level.Load() != statemachine.LevelGate {
		t.Fatalf("a lower level entry: %+v, level %d (it must not fall)", r, level.Load())
	}
	_, err := s.Update([]sm.Entry{{Index: 3, Cmd: statemachine.EncodeLevel(statemachine.MaxLevel + 1)}})
	if !errors.Is(err, statemachine.ErrLevelUnreadable) {
		t.Fatalf("unreadable level: %v", err)
	}
}
