package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/statemachine"
	"nacos-lockd/storage"
)

// soloEnv starts nodes under the sole-voter engine on one data dir.
type soloEnv struct {
	dir, addr       string
	snapshotEntries uint64
}

func (e *soloEnv) start(t *testing.T) (*Node, *storage.DB) {
	t.Helper()
	db, err := storage.Open(storage.Config{Dir: filepath.Join(e.dir, "locks")})
	if err != nil {
		t.Fatal(err)
	}
	n, err := Start(RaftConfig{NodeHostDir: filepath.Join(e.dir, "raft"), RaftAddress: e.addr, Engine: EngineSolo, SnapshotEntries: e.snapshotEntries}, db, nil, zerolog.Nop())
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	return n, db
}

// crash stops a node the way a killed process stops: the engine's log is
// closed, but the table is not persisted (Close would persist it), so
// only what the log holds brings the table back.
func crash(n *Node, db *storage.DB) {
	n.solo.close()
	n.gc.close()
	db.Close()
}

// crashRestart reads n's stats, crashes it and starts a node again on the
// same data dir, whose stats it reads too; the caller closes the new node
// and store.
func (e *soloEnv) crashRestart(t *testing.T, n *Node, db *storage.DB) (before, after statemachine.Stats, _ *Node, _ *storage.DB) {
	t.Helper()
	before, err := n.Stats()
	if err != nil {
		t.Fatal(err)
	}
	crash(n, db)
	n, db = e.start(t)
	if after, err = n.Stats(); err != nil {
		n.Close()
		db.Close()
		t.Fatal(err)
	}
	return before, after, n, db
}

// TestSoloReplaysItsLogAfterACrash: every acknowledged entry comes back
// from the log after a crash, in order, and tokens go on from there.
func TestSoloReplaysItsLogAfterACrash(t *testing.T) {
	env := &soloEnv{dir: t.TempDir(), addr: freeAddr(t)}
	n, db := env.start(t)
	now := time.Now().UnixMilli()
	first := propose(t, n, acq(R, "k", "a", "c1", now, 60000, 0))
	if r := propose(t, n, acq(R, "k", "b", "c2", now, 60000, 60000)); r.WaitPosition != 0 {
		t.Fatalf("queue: %+v", r)
	}
	for i := range 40 {
		propose(t, n, acq(N, fmt.Sprint("bulk-", i), "o", "c1", now, 600000, 0))
	}
	last := propose(t, n, rel(R, "k", "a", now))
	if !last.Success() {
		t.Fatalf("release: %+v", last)
	}
	before, after, n, db := env.crashRestart(t, n, db)
	defer db.Close()
	defer n.Close()
	if after.Applied != before.Applied || after.Held != before.Held || after.Fence != before.Fence {
		t.Fatalf("after the crash %+v, before %+v", after, before)
	}
	if l, err := n.Lock(R, "k"); err != nil || l.Owner != "b" || !l.Unclaimed || l.Token <= first.Token {
		t.Fatalf("handed-off lock after the crash: %+v %v", l, err)
	}
	if r := propose(t, n, acq(N, "fresh", "o", "c1", time.Now().UnixMilli(), 1000, 0)); r.Token <= before.Fence || r.Token != before.Applied+1 {
		t.Fatalf("token %d after the crash: want the next index %d, above the fence %d", r.Token, before.Applied+1, before.Fence)
	}
}

// TestSoloCompactsItsLog: once the table is durable past a number of
// entries, the log drops them and deletes the segments that held only
// those; a crash after that still brings back everything.
func TestSoloCompactsItsLog(t *testing.T) {
	defer func(old int64) { soloSegmentSize = old }(soloSegmentSize)
	soloSegmentSize = 8 << 10
	env := &soloEnv{dir: t.TempDir(), addr: freeAddr(t), snapshotEntries: 16}
	n, db := env.start(t)
	now := time.Now().UnixMilli()
	for i := range 400 {
		propose(t, n, acq(N, fmt.Sprint("k-", i), "o", "c1", now, 600000, 0))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		rs, err := n.solo.log.ReadRaftState(n.cfg.ShardID, n.cfg.ReplicaID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if rs.FirstIndex > 300 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log still starts at entry %d after 400 entries, compacting every 16", rs.FirstIndex)
		}
		propose(t, n, renew(N, "k-0", "o", "c1", now, 600000))
	}
	segs, err := filepath.Glob(filepath.Join(soloDir(env.dir+"/raft"), "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) > 4 {
		t.Fatalf("%d segments left after compaction: %v", len(segs), segs)
	}
	before, after, n, db := env.crashRestart(t, n, db)
	defer db.Close()
	defer n.Close()
	if after.Applied != before.Applied || after.Held != 400 {
		t.Fatalf("after the crash %+v, before %+v", after, before)
	}
}

// TestSoloKeepsItsEngine: a data dir stays with the engine that made it.
func TestSoloKeepsItsEngine(t *testing.T) {
	soloDirs := &soloEnv{dir: t.TempDir(), addr: freeAddr(t)}
	n, db := soloDirs.start(t)
	propose(t, n, acq(N, "k", "o", "c1", time.Now().UnixMilli(), 60000, 0))
	n.Close()
	_, err := Start(RaftConfig{NodeHostDir: filepath.Join(soloDirs.dir, "raft"), RaftAddress: soloDirs.addr}, db, nil, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "single-node engine") {
		t.Fatalf("the Raft engine on a single-node engine's data dir: %v", err)
	}
	db.Close()

	raft := &nodeEnv{dir: t.TempDir(), addr: freeAddr(t)}
	n, db = raft.start(t)
	defer db.Close()
	n.Close()
	_, err = Start(RaftConfig{NodeHostDir: filepath.Join(raft.dir, "raft"), RaftAddress: raft.addr, Engine: EngineSolo}, db, nil, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "Raft engine") {
		t.Fatalf("the single-node engine on a Raft data dir: %v", err)
	}
	if _, err := os.Stat(soloDir(filepath.Join(raft.dir, "raft"))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused start left a single-node log behind: %v", err)
	}
}

// TestSoloAloneInItsShard: the engine's node leads, is its only member,
// refuses membership changes and joins, and reads its own table.
func TestSoloAloneInItsShard(t *testing.T) {
	env := &soloEnv{dir: t.TempDir(), addr: freeAddr(t)}
	n, db := env.start(t)
	defer db.Close()
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil || !n.IsLeader() || !n.soleVoter() {
		t.Fatalf("ready %v, leader %v, sole voter %v", err, n.IsLeader(), n.soleVoter())
	}
	if m, err := n.Membership(ctx); err != nil || len(m) != 1 || m[n.ReplicaID()] != env.addr {
		t.Fatalf("membership %v %v", m, err)
	}
	if err := n.AddReplica(ctx, 2, freeAddr(t)); !errors.Is(err, ErrSoleVoterEngine) {
		t.Fatalf("add replica: %v", err)
	}
	if err := n.RemoveReplica(ctx, 1); !errors.Is(err, ErrSoleVoterEngine) {
		t.Fatalf("remove replica: %v", err)
	}
	if err := n.TransferLeadership(ctx); err != nil {
		t.Fatalf("leadership transfer with nobody to take it: %v", err)
	}
	r := propose(t, n, acq(N, "k", "o", "c1", time.Now().UnixMilli(), 60000, 0))
	if l, err := n.LockLinearizable(ctx, N, "k"); err != nil || l.Owner != "o" || l.Token != r.Token {
		t.Fatalf("read after the acquire: %+v %v", l, err)
	}
	if err := n.ProposeLevel(ctx, statemachine.LevelLeaseAtNow); err != nil || n.ClusterLevel() != statemachine.LevelLeaseAtNow {
		t.Fatalf("level entry: %v, level %d", err, n.ClusterLevel())
	}

	db2, err := storage.Open(storage.Config{Dir: filepath.Join(t.TempDir(), "locks")})
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	_, err = Start(RaftConfig{NodeHostDir: t.TempDir(), RaftAddress: freeAddr(t), Engine: EngineSolo, Join: true}, db2, nil, zerolog.Nop())
	if err == nil {
		t.Fatal("the single-node engine joined a cluster")
	}
}

// TestSoloStartsOnInstalledStore: an imported table (ahead of an empty
// log) is where the engine's numbering goes on from.
func TestSoloStartsOnInstalledStore(t *testing.T) {
	dir := t.TempDir()
	db, err := storage.Open(storage.Config{Dir: filepath.Join(dir, "locks")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tb, _, err := statemachine.NewImportedTable(goldenImport(), 900)
	if err != nil {
		t.Fatal(err)
	}
	if err := statemachine.InstallFresh(db, tb); err != nil {
		t.Fatal(err)
	}
	n, err := Start(RaftConfig{NodeHostDir: filepath.Join(dir, "raft"), RaftAddress: freeAddr(t), Engine: EngineSolo}, db, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	l, err := n.Lock(R, "imported-r")
	if err != nil || l.Owner != "nacos-owner" || l.Count != 2 || l.Token != 2 || len(l.Waiters) != 1 {
		t.Fatalf("imported lock on the node: %+v %v", l, err)
	}
	r := propose(t, n, acq(N, "fresh", "o", "c", 1000, 60000, 0))
	if !r.Success() || r.Token <= 3 {
		t.Fatalf("grant after import: %+v, want a token above 3", r)
	}
}

// TestChooseEngine: a new single node gets the engine asked for (Raft
// when nothing is asked), a cluster member Raft, and a data dir the engine
// that made it; a cluster member on a single-node engine's data dir is
// refused.
func TestChooseEngine(t *testing.T) {
	touch := func(dir, name string) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte("1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name   string
		made   func(dir string)
		want   string
		single bool
		got    string // "" for an error
	}{
		{"new single, solo", nil, EngineSolo, true, EngineSolo},
		{"new single, raft", nil, EngineRaft, true, EngineRaft},
		{"new single, nothing asked", nil, "", true, EngineRaft},
		{"new cluster member", nil, EngineSolo, false, EngineRaft},
		{"single-node engine's dir", func(d string) { touch(soloDir(d), "0000000000000000.log") }, EngineRaft, true, EngineSolo},
		{"single-node engine's dir, cluster member", func(d string) { touch(soloDir(d), "0000000000000000.log") }, EngineRaft, false, ""},
		{"Raft's dir", func(d string) { touch(d, bootstrappedMarker) }, EngineSolo, true, EngineRaft},
		{"Raft's dir, never started", func(d string) { touch(d, dragonboatFlagFile) }, EngineSolo, true, EngineRaft},
		{"Raft's dir, log chosen", func(d string) { touch(d, raftLogMarker) }, EngineSolo, true, EngineRaft},
		{"unknown engine", nil, "paxos", true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "raft")
			if c.made != nil {
				c.made(dir)
			}
			got, err := ChooseEngine(dir, c.want, c.single)
			if c.got == "" {
				if err == nil {
					t.Fatalf("chose %q, want an error", got)
				}
				return
			}
			if err != nil || got != c.got {
				t.Fatalf("chose %q, %v; want %q", got, err, c.got)
			}
		})
	}
}
