package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/rs/zerolog"

	"nacos-lockd/internal/syncbuf"
	"nacos-lockd/replica/raftlog"
	"nacos-lockd/replica/walfile"
	"nacos-lockd/statemachine"
	"nacos-lockd/storage"
)

func TestNodeCoalescesRenews(t *testing.T) { forEachEngine(t, testNodeCoalescesRenews) }

func testNodeCoalescesRenews(t *testing.T, engine string) {
	env := &nodeEnv{engine: engine, dir: t.TempDir(), addr: freeAddr(t), window: 50 * time.Millisecond}
	n, db := env.start(t)
	defer db.Close()
	defer n.Close()
	const locks = 64
	now := time.Now().UnixMilli()
	for i := range locks {
		if r := propose(t, n, acq(N, fmt.Sprint("k", i), "o", "c1", now, 60000, 0)); !r.Success() {
			t.Fatalf("acquire: %+v", r)
		}
	}
	before, err := n.Stats()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	results := make([]statemachine.Result, locks)
	errs := make([]error, locks)
	for i := range locks {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			results[i], errs[i] = n.Propose(ctx, renew(N, fmt.Sprint("k", i), "o", "c1", time.Now().UnixMilli(), 90000))
		})
	}
	wg.Wait()
	for i := range locks {
		if errs[i] != nil || !results[i].Success() {
			t.Fatalf("renew %d: %+v %v", i, results[i], errs[i])
		}
	}
	after, err := n.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if entries := after.Applied - before.Applied; entries >= locks/2 {
		t.Fatalf("%d renews took %d entries; want them coalesced", locks, entries)
	}
	l, err := n.Lock(N, "k7")
	if err != nil {
		t.Fatal(err)
	}
	if l.LeaseEndMs < now+90000 {
		t.Fatalf("lease ends %d, want at least %d after the renew", l.LeaseEndMs, now+90000)
	}
	// A second renew of the same lock while one is being collected goes
	// into the next entry, and both succeed.
	var r1, r2 statemachine.Result
	var e1, e2 error
	wg.Go(func() {
		r1, e1 = n.Propose(context.Background(), renew(N, "k1", "o", "c1", time.Now().UnixMilli(), 90000))
	})
	wg.Go(func() {
		r2, e2 = n.Propose(context.Background(), renew(N, "k1", "o", "c1", time.Now().UnixMilli(), 90000))
	})
	wg.Wait()
	if e1 != nil || e2 != nil || !r1.Success() || !r2.Success() {
		t.Fatalf("same-lock renews: %+v %v, %+v %v", r1, e1, r2, e2)
	}
}

// A renew of a lease under waitMinLeaseMs never waits out the
// window, even in quick succession: its margin is too short to spend in
// the queue. A renew of a longer lease just after it does wait.
func TestNodeNeverHoldsAShortLeaseRenew(t *testing.T) {
	forEachEngine(t, testNodeNeverHoldsAShortLeaseRenew)
}

func testNodeNeverHoldsAShortLeaseRenew(t *testing.T, engine string) {
	const window = 10 * time.Second // far longer than any commit
	env := &nodeEnv{engine: engine, dir: t.TempDir(), addr: freeAddr(t), window: window}
	n, db := env.start(t)
	defer db.Close()
	defer n.Close()
	now := time.Now().UnixMilli()
	propose(t, n, acq(N, "short", "o", "c1", now, 600, 0))
	propose(t, n, acq(N, "long", "o", "c1", now, 60000, 0))
	renewsAtOnce(t, n, "short", 600, 0, window) // a renew just came: quick succession
	n.gc.mu.Lock()
	n.gc.lastRenew = time.Now()
	n.gc.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := n.Propose(ctx, renew(N, "long", "o", "c1", time.Now().UnixMilli(), 60000)); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a long-lease renew in quick succession was answered before the window (%v): the test cannot tell waiting from not", err)
	}
}

// renewsAtOnce renews key (held by "o" on "c1") three times, each with
// the previous renew's arrival set quiet ago, and fails if one fails or
// waited for the window (far longer than a commit, so waiting cannot pass
// for not waiting). The spell is made by ageing the last arrival, not by
// sleeping.
func renewsAtOnce(t *testing.T, n *Node, key string, lease int64, quiet, window time.Duration) {
	t.Helper()
	for i := range 3 {
		n.gc.mu.Lock()
		n.gc.lastRenew = time.Now().Add(-quiet)
		n.gc.mu.Unlock()
		start := time.Now()
		r := propose(t, n, renew(N, key, "o", "c1", time.Now().UnixMilli(), lease))
		if !r.Success() {
			t.Fatalf("renew %d of %s (lease %d ms): %+v", i, key, lease, r)
		}
		if took := time.Since(start); took >= window/2 {
			t.Fatalf("renew %d of %s (lease %d ms) took %s: it waited for the %s window", i, key, lease, took, window)
		}
	}
}

// The window is for renews that come in quick succession: a renew more
// than a window after the previous one is proposed at once instead of
// waiting it out (a commit takes milliseconds; the window is 500 ms).
func TestNodeProposesALoneRenewAtOnce(t *testing.T) {
	forEachEngine(t, testNodeProposesALoneRenewAtOnce)
}

func testNodeProposesALoneRenewAtOnce(t *testing.T, engine string) {
	// A window far longer than any commit under load, so that a renew that
	// waited for it cannot pass for one that did not; the quiet spell before
	// each renew is made by ageing the last renew's arrival, not by sleeping.
	const window = 10 * time.Second
	env := &nodeEnv{engine: engine, dir: t.TempDir(), addr: freeAddr(t), window: window}
	n, db := env.start(t)
	defer db.Close()
	defer n.Close()
	propose(t, n, acq(N, "k", "o", "c1", time.Now().UnixMilli(), 60000, 0))
	renewsAtOnce(t, n, "k", 60000, 2*window, window) // quiet for longer than the window
}

func TestNodeWithCoalescingOffProposesEachRenewAlone(t *testing.T) {
	forEachEngine(t, testNodeWithCoalescingOffProposesEachRenewAlone)
}

func testNodeWithCoalescingOffProposesEachRenewAlone(t *testing.T, engine string) {
	env := &nodeEnv{engine: engine, dir: t.TempDir(), addr: freeAddr(t), window: -1} // --coalesce-window 0
	n, db := env.start(t)
	defer db.Close()
	defer n.Close()
	const locks = 16
	now := time.Now().UnixMilli()
	for i := range locks {
		propose(t, n, acq(N, fmt.Sprint("k", i), "o", "c1", now, 60000, 0))
	}
	before, err := n.Stats()
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range locks {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if r, err := n.Propose(ctx, renew(N, fmt.Sprint("k", i), "o", "c1", time.Now().UnixMilli(), 90000)); err != nil || !r.Success() {
				t.Errorf("renew %d: %+v %v", i, r, err)
			}
		})
	}
	wg.Wait()
	after, err := n.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if entries := after.Applied - before.Applied; entries != locks {
		t.Fatalf("%d renews took %d entries; with coalescing off each is its own", locks, entries)
	}
}

func TestNodeCloseFailsCollectedRenews(t *testing.T) {
	forEachEngine(t, testNodeCloseFailsCollectedRenews)
}

func testNodeCloseFailsCollectedRenews(t *testing.T, engine string) {
	env := &nodeEnv{engine: engine, dir: t.TempDir(), addr: freeAddr(t), window: time.Hour}
	n, db := env.start(t)
	defer db.Close()
	now := time.Now().UnixMilli()
	propose(t, n, acq(N, "k", "o", "c1", now, 60000, 0))
	propose(t, n, acq(N, "k2", "o", "c1", now, 60000, 0))
	// The first renew after a quiet spell is proposed at once; the next,
	// within the window of it, is collected and waits out the window.
	propose(t, n, renew(N, "k2", "o", "c1", now, 60000))
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := n.Propose(ctx, renew(N, "k", "o", "c1", time.Now().UnixMilli(), 60000))
		errc <- err
	}()
	time.Sleep(50 * time.Millisecond) // let the collector take it
	n.Close()
	select {
	case err := <-errc:
		if !errors.Is(err, ErrUnavailable) {
			t.Fatalf("renew collected at close: %v, want ErrUnavailable", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a renew collected at close never returned")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := n.Propose(ctx, renew(N, "k", "o", "c1", 1, 1)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("renew after close: %v", err)
	}
}

// Group commit: commands that arrive while an entry commits share the
// next one, each gets its own result, and a command that comes alone is
// proposed at once (the renew window is an hour here: nothing but renews
// may wait for it).
func TestNodeGroupsConcurrentCommands(t *testing.T) {
	forEachEngine(t, testNodeGroupsConcurrentCommands)
}

func testNodeGroupsConcurrentCommands(t *testing.T, engine string) {
	env := &nodeEnv{engine: engine, dir: t.TempDir(), addr: freeAddr(t), window: time.Hour}
	n, db := env.start(t)
	defer db.Close()
	defer n.Close()
	// propose gives it 5 s: waiting for the hour-long window would fail it.
	if r := propose(t, n, acq(N, "alone", "o", "c1", time.Now().UnixMilli(), 60000, 0)); !r.Success() {
		t.Fatalf("lone acquire: %+v", r)
	}
	const clients = 64
	before, err := n.Stats()
	if err != nil {
		t.Fatal(err)
	}
	run := func(op func(i int) statemachine.Command, check func(i int, r statemachine.Result) bool) {
		var wg sync.WaitGroup
		for i := range clients {
			wg.Go(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				r, err := n.Propose(ctx, op(i))
				if err != nil || !check(i, r) {
					t.Errorf("client %d: %+v %v", i, r, err)
				}
			})
		}
		wg.Wait()
	}
	// Each client takes its own key, then queues on a shared one.
	run(func(i int) statemachine.Command {
		return acq(N, fmt.Sprint("own", i), fmt.Sprint("o", i), "c1", time.Now().UnixMilli(), 60000, 0)
	}, func(_ int, r statemachine.Result) bool { return r.Success() && r.Count == 1 && r.Token > 0 })
	run(func(i int) statemachine.Command {
		return acq(R, "shared", fmt.Sprint("o", i), "c1", time.Now().UnixMilli(), 60000, 60000)
	}, func(_ int, r statemachine.Result) bool {
		return r.Success() || (r.Code == statemachine.CodeHeld && r.WaitPosition >= 0)
	})
	after, err := n.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if entries := after.Applied - before.Applied; entries >= 2*clients {
		t.Fatalf("%d commands took %d entries; want them grouped", 2*clients, entries)
	}
	if after.Held != before.Held+clients+1 || after.Queued != clients-1 {
		t.Fatalf("after: %d held, %d waiting; want %d and %d", after.Held, after.Queued, before.Held+clients+1, clients-1)
	}
	// The queue hands the shared lock on in order, one grant per entry at
	// most: release it 63 times from whoever holds it.
	var tokens []uint64
	for range clients {
		l, err := n.Lock(R, "shared")
		if err != nil || l.Owner == "" {
			t.Fatalf("shared: %+v %v", l, err)
		}
		tokens = append(tokens, l.Token)
		if r := propose(t, n, rel(R, "shared", l.Owner, time.Now().UnixMilli())); !r.Success() {
			t.Fatalf("release by %s: %+v", l.Owner, r)
		}
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("hand-off tokens %v do not increase", tokens)
		}
	}
}

// A grouped entry applies identically on every replica: three real
// replicas, concurrent commands of every groupable kind on a few shared
// keys, then every replica's whole table compared byte for byte.
func TestGroupedEntriesApplyIdenticallyOnEveryReplica(t *testing.T) {
	dir := t.TempDir()
	members := map[uint64]string{1: freeAddr(t), 2: freeAddr(t), 3: freeAddr(t)}
	nodes := make([]*Node, 0, 3)
	// Leader changes and dragonboat's warnings are kept and shown if the
	// test fails. (Its failures with proposals timing out after 10s, with
	// a steady leader, were one replica's disk stalling: another process
	// writing with fsync makes it fail every time, hence proposeUntilDone.)
	// (A buffer, not
	// t.Log: dragonboat's logger is the process's, and writes on after the
	// test.)
	var logs syncbuf.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the replicas' log:\n%s", logs.String())
		}
	})
	log := zerolog.New(&logs).Level(zerolog.InfoLevel)
	for id := uint64(1); id <= 3; id++ {
		db, err := storage.Open(storage.Config{Dir: filepath.Join(dir, fmt.Sprint(id), "locks")})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		n, err := Start(RaftConfig{NodeHostDir: filepath.Join(dir, fmt.Sprint(id), "raft"), RaftAddress: members[id],
			ReplicaID: id, Members: members, ElectionRTT: 50, HeartbeatRTT: 5}, db, nil, log.With().Uint64("node", id).Logger())
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		nodes = append(nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for _, n := range nodes {
		if err := n.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range nodes {
		if n.soleVoter() {
			t.Fatalf("replica %d of three counts itself the sole voter: its claims would skip ReadIndex", i+1)
		}
	}
	var before uint64
	if s, err := nodes[0].Stats(); err == nil {
		before = s.Applied
	}
	var wg sync.WaitGroup
	var proposed sync.WaitGroup
	var retries atomic.Int64
	const clients, rounds = 24, 30
	for i := range clients {
		n := nodes[i%3] // followers forward to the leader
		proposed.Add(1)
		wg.Go(func() {
			defer proposed.Done()
			owner, conn := fmt.Sprint("o", i), fmt.Sprint("c", i)
			for r := range rounds {
				key := fmt.Sprint("k", (i+r)%5)
				now := time.Now().UnixMilli()
				var cmd statemachine.Command
				switch (i + r) % 4 {
				case 0:
					cmd = acq(R, key, owner, conn, now, 60000, 60000)
				case 1:
					cmd = renew(R, key, owner, conn, now, 60000)
				case 2:
					cmd = cancelWait(R, key, owner, conn, now)
				default:
					cmd = rel(R, key, owner, now)
				}
				if err := proposeUntilDone(ctx, n, cmd, &retries); err != nil {
					t.Errorf("client %d: %v", i, err)
					return
				}
			}
		})
	}
	proposed.Wait()
	wg.Wait()
	var want []byte
	for i, n := range nodes {
		// A linearizable read first: every replica has applied all of it.
		if _, err := n.nh.SyncRead(ctx, n.cfg.ShardID, statemachine.StatsQuery{}); err != nil {
			t.Fatal(err)
		}
		v, err := n.nh.StaleRead(n.cfg.ShardID, statemachine.StateQuery{})
		if err != nil {
			t.Fatal(err)
		}
		got := v.([]byte)
		if i == 0 {
			want = got
			continue
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("replica %d's table differs from replica 1's", i+1)
		}
	}
	s, err := nodes[0].Stats()
	if err != nil {
		t.Fatal(err)
	}
	if entries := s.Applied - before; entries >= clients*rounds {
		t.Fatalf("%d commands took %d entries: nothing was grouped", clients*rounds, entries)
	}
	t.Logf("%d commands (%d proposed again after an unknown outcome) in %d entries", clients*rounds, retries.Load(), s.Applied-before)
}

// proposeUntilDone proposes cmd again while its outcome is unknown
// (ErrUnavailable) until ctx ends. The replicated-determinism test needs
// every command in the log, not any one proposal to finish in time: a
// replica whose disk stalls (another process's fsync ahead of its own, as
// on a loaded CI machine) cannot complete its proposals until it has
// stored them, and each attempt is bounded so the stall shows as retries.
// A command applied twice is as deterministic as one applied once.
func proposeUntilDone(ctx context.Context, n *Node, cmd statemachine.Command, retries *atomic.Int64) error {
	for {
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := n.Propose(pctx, cmd)
		cancel()
		if err == nil || !errors.Is(err, ErrUnavailable) || ctx.Err() != nil {
			return err
		}
		retries.Add(1)
	}
}

// TestSecondEntryOnlyForAFollower pins the in-flight rule (groupInFlight):
// with one entry in flight, queued commands for other locks wait for it,
// and a command for a lock in that entry opens the second slot.
func TestSecondEntryOnlyForAFollower(t *testing.T) {
	cmd := func(op statemachine.Op, key string) *pendingCmd {
		return &pendingCmd{cmd: statemachine.Command{Op: op, Kind: statemachine.KindNonReentrant, Key: key}}
	}
	g := &groupCommit{}
	if !g.slotFree() {
		t.Fatal("nothing in flight: the slot must be free")
	}
	g.flying = []*submitted{{batch: []*pendingCmd{cmd(statemachine.OpAcquire, "a"), cmd(statemachine.OpAcquire, "b")}}}
	g.queue = []*pendingCmd{cmd(statemachine.OpAcquire, "c"), cmd(statemachine.OpRelease, "d")}
	g.following = g.queueFollows()
	if g.slotFree() {
		t.Fatal("one entry in flight and only other locks queued: the second slot must stay shut")
	}
	g.queue = append(g.queue, cmd(statemachine.OpRelease, "b"))
	g.following = g.queueFollows()
	if !g.slotFree() {
		t.Fatal("a queued release of a lock in the entry in flight must open the second slot")
	}
	g.queue[2].cmd.Kind = statemachine.KindReentrant // same key, another kind: another lock
	g.following = g.queueFollows()
	if g.slotFree() {
		t.Fatal("same key of another kind is another lock: the slot must stay shut")
	}
	g.following = true
	g.flying = append(g.flying, &submitted{batch: []*pendingCmd{cmd(statemachine.OpRelease, "b")}})
	if g.slotFree() {
		t.Fatalf("%d entries in flight: no third", groupInFlight)
	}
}

// Commands waiting out the window stay queued when a slot frees up; the
// window's end or a command that cannot wait sends them.
func TestFreeSlotDoesNotSendWaitingCommands(t *testing.T) {
	now := time.Now()
	claim := &pendingCmd{cmd: statemachine.Command{Op: statemachine.OpClaim, Kind: statemachine.KindNonReentrant, Key: "k"}, mayWait: true}
	g := &groupCommit{window: 5 * time.Millisecond, queue: []*pendingCmd{claim}}
	if g.holding(now) {
		t.Fatal("no window armed: nothing to hold for")
	}
	g.flush, g.flushAt = time.AfterFunc(time.Hour, func() {}), now.Add(5*time.Millisecond)
	defer g.flush.Stop()
	if !g.holding(now) {
		t.Fatal("a claim's record waiting out the window must not go alone when a slot frees up")
	}
	if g.holding(now.Add(5 * time.Millisecond)) {
		t.Fatal("the window has ended: it must go")
	}
	g.queue = append(g.queue, &pendingCmd{cmd: statemachine.Command{Op: statemachine.OpRelease, Kind: statemachine.KindNonReentrant, Key: "k"}})
	if g.holding(now) {
		t.Fatal("a release cannot wait: everything queued must go with it")
	}
}

// TestLogBusyFollowsEntrySize: the log's syncs hand their P off
// (walfile's Busy, which Start gives either log as logBusy) while the entry
// proposed last carries syncHandOffMinCommands commands or more, and not
// after a lone command.
func TestLogBusyFollowsEntrySize(t *testing.T) {
	env := &nodeEnv{dir: t.TempDir(), addr: freeAddr(t), window: 50 * time.Millisecond}
	n, db := env.start(t)
	defer db.Close()
	defer n.Close()
	fs := logBusyFS{}
	now := time.Now().UnixMilli()
	for i := range syncHandOffMinCommands {
		propose(t, n, acq(N, fmt.Sprint("k", i), "o", "c1", now, 60000, 0))
	}
	if fs.Busy() {
		t.Fatal("after lone commands the log's sync would hand its P off")
	}
	batch := make([]*pendingCmd, syncHandOffMinCommands)
	for i := range batch {
		batch[i] = &pendingCmd{cmd: renew(N, fmt.Sprint("k", i), "o", "c1", now, 90000), out: make(chan outcome, 1)}
	}
	start := time.Now()
	s, err := n.gc.submit(batch, start.Add(5*time.Second), start)
	if err != nil {
		t.Fatal(err)
	}
	if !fs.Busy() {
		t.Fatalf("an entry of %d commands in flight and the log's sync would keep its P", len(batch))
	}
	if r := <-s.rs.AppliedC(); !r.Completed() {
		t.Fatalf("grouped renews: %+v", r)
	}
	s.rs.Release()
	propose(t, n, renew(N, "k0", "o", "c1", time.Now().UnixMilli(), 90000))
	if fs.Busy() {
		t.Fatal("after a lone command the log's sync would still hand its P off")
	}
}

// TestLogBusyWhenAnEntryHandsOff: an entry whose RELEASE hands the lock to
// a waiter hands the sync's P off even alone (its waiter's claim arrives
// during the sync), and a release that frees the lock for nobody does not.
func TestLogBusyWhenAnEntryHandsOff(t *testing.T) {
	env := &nodeEnv{dir: t.TempDir(), addr: freeAddr(t), window: 50 * time.Millisecond}
	n, db := env.start(t)
	defer db.Close()
	defer n.Close()
	fs := logBusyFS{}
	now := time.Now().UnixMilli()
	propose(t, n, acq(N, "k", "a", "c1", now, 60000, 0))
	if got := propose(t, n, acq(N, "k", "b", "c2", now, 60000, 60000)); got != queued(0) {
		t.Fatalf("b's blocking acquire: %+v, want queued", got)
	}
	if fs.Busy() {
		t.Fatal("a lone acquire and the log's sync would hand its P off")
	}
	propose(t, n, rel(N, "k", "a", now))
	if !fs.Busy() {
		t.Fatal("a release that hands the lock to b and the log's sync would keep its P while b's claim arrives")
	}
	propose(t, n, acq(N, "free", "a", "c1", now, 60000, 0))
	propose(t, n, rel(N, "free", "a", now))
	if fs.Busy() {
		t.Fatal("a release with nobody waiting and the log's sync would still hand its P off")
	}
}

// TestSoleVoterReadsLocally: a single node that leads its shard counts
// itself the sole voter (so LockLinearizable reads its own replica, and
// the read shows what the answered acquire left), and stops counting
// itself so once a second member is added. The 3-node test above checks
// that no replica of a cluster does.
func TestSoleVoterReadsLocally(t *testing.T) {
	env := &nodeEnv{dir: t.TempDir(), addr: freeAddr(t), window: 50 * time.Millisecond}
	n, db := env.start(t)
	defer db.Close()
	defer n.Close()
	if !n.soleVoter() {
		t.Fatal("a single-node shard's leader does not count itself the sole voter")
	}
	now := time.Now().UnixMilli()
	res := propose(t, n, acq(N, "k", "a", "c1", now, 60000, 0))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := n.LockLinearizable(ctx, N, "k")
	if err != nil || l.Owner != "a" || l.Token != res.Token {
		t.Fatalf("read after the acquire: %+v, %v; want owner a, token %d", l, err, res.Token)
	}
	// The new member never starts: the change commits on this replica's
	// vote alone and applies here, which is all soleVoter reads.
	if err := n.AddReplica(ctx, 2, freeAddr(t)); err != nil {
		t.Fatal(err)
	}
	if n.soleVoter() {
		t.Fatal("after a second member was added the node still counts itself the sole voter")
	}
}

// A result that is there when the caller's deadline has passed too is the
// answer: the command committed, and must not be reported as not.
func TestResultWinsOverAPassedDeadline(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for i := range 200 { // a select between two ready cases picks either
		p := &pendingCmd{cmd: statemachine.Command{Op: statemachine.OpAcquire}, out: make(chan outcome, 1)}
		p.out <- outcome{res: statemachine.Result{Code: statemachine.CodeOK, Token: 7}}
		res, err := p.wait(ctx)
		if err != nil || res.Token != 7 {
			t.Fatalf("try %d: %+v %v, want the committed result", i, res, err)
		}
	}
	p := &pendingCmd{cmd: statemachine.Command{Op: statemachine.OpAcquire}, out: make(chan outcome, 1)}
	if _, err := p.wait(ctx); !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.Canceled) {
		t.Fatalf("no result and the ctx ended: %v, want unavailable and the ctx's error", err)
	}
}

// logBusyFS asks logBusy, as the log's files do on every sync.
type logBusyFS struct{}

func (logBusyFS) Busy() bool { return logBusy() }

// TestLogsGetTheBusyHint: both logs' files are given logBusy.
func TestLogsGetTheBusyHint(t *testing.T) {
	f, ok := logFactory(LogLockd, nil).LogDBFactory.(raftlog.Factory)
	if !ok || f.Options.Busy == nil {
		t.Fatalf("our log's factory %T has no Busy hint", logFactory(LogLockd, nil).LogDBFactory)
	}
	if logFactory(LogPebble, nil).LogDBFactory != nil {
		t.Fatal("pebble's log is dragonboat's default, not a factory of ours")
	}
	fs, ok := vfs.Default.(walfile.FS)
	if !ok || fs.Busy == nil {
		t.Fatalf("pebble's file system is %T with Busy %v: the hint is not installed", vfs.Default, ok && fs.Busy != nil)
	}
}

// A recorded command's outcome reaches its channel as Node.Record
// promises, from wherever group commit settles it: nil once applied with
// success, ErrRecordRefused when applied and refused, the failure when it
// was not committed; a record whose deadline passed while queued is failed
// there and never proposed.
func TestRecordedOutcomes(t *testing.T) {
	claim := statemachine.Command{Op: statemachine.OpClaim, Kind: N, Key: "k", Owner: "o", ConnID: "c"}
	recorded := func() *pendingCmd { return &pendingCmd{cmd: claim, recorded: make(chan error, 1)} }
	p := recorded()
	p.deliver(outcome{res: statemachine.Result{Code: statemachine.CodeOK}})
	if err := <-p.recorded; err != nil {
		t.Fatalf("applied with success: %v", err)
	}
	p = recorded()
	p.deliver(outcome{res: statemachine.Result{Code: statemachine.CodeNotOwner}})
	if err := <-p.recorded; !errors.Is(err, ErrRecordRefused) {
		t.Fatalf("applied and refused: %v, want ErrRecordRefused", err)
	}
	p = recorded()
	p.deliver(outcome{err: errClosing})
	if err := <-p.recorded; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("not committed: %v, want the failure", err)
	}
	if p.out != nil {
		t.Fatal("a recorded command got a caller's channel too")
	}

	g := newGroupCommit(nil, 0)
	late := recorded()
	late.deadline = time.Now().Add(-time.Second)
	g.queue = []*pendingCmd{late}
	if entry := g.take(time.Now()); len(entry) != 0 {
		t.Fatalf("a record past its deadline was taken into an entry: %d commands", len(entry))
	}
	if err := <-late.recorded; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("record past its deadline: %v, want ErrUnavailable", err)
	}
}
