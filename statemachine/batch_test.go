package statemachine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/storage"
)

func TestBatchFrameRoundTripAndRejects(t *testing.T) {
	cmds := [][]byte{renew(N, "a", "o", "c", 1, 10).Encode(), expire(N, "b", 3, 2).Encode()}
	v, got, err := decodeBatch(EncodeBatch(CommandBatchVersion, cmds))
	if err != nil || v != CommandBatchVersion || len(got) != 2 || !bytes.Equal(got[0], cmds[0]) || !bytes.Equal(got[1], cmds[1]) {
		t.Fatalf("round trip: version %d %q, %v", v, got, err)
	}
	good := EncodeBatch(CommandBatchVersion, cmds)
	tooMany := make([][]byte, MaxBatch+1)
	for i := range tooMany {
		tooMany[i] = cmds[0]
	}
	for name, frame := range map[string][]byte{
		"empty":            {},
		"version only":     {CommandBatchVersion},
		"no commands":      {CommandBatchVersion, 0},
		"too many":         EncodeBatch(CommandBatchVersion, tooMany),
		"truncated":        good[:len(good)-1],
		"trailing":         append(bytes.Clone(good), 0),
		"length past end":  {CommandBatchVersion, 1, 50, 1},
		"single cmd bytes": cmds[0],
	} {
		if _, _, err := decodeBatch(frame); !errors.Is(err, errMalformed) {
			t.Errorf("%s: decodeBatch err = %v, want malformed", name, err)
		}
		tb := NewTable()
		tb.Apply(1, acq(N, "a", "o", "c", 1, 1000, 0))
		before := tb.StateBytes()
		if rs := tb.ApplyBatch(2, frame); rs != nil {
			t.Errorf("%s: results %+v for a bad frame", name, rs)
		}
		if tb.Applied() != 2 {
			t.Errorf("%s: applied %d, want 2", name, tb.Applied())
		}
		tb.applied = 1
		if !bytes.Equal(tb.StateBytes(), before) {
			t.Errorf("%s: a bad frame changed the table", name)
		}
	}
}

// renewFrame frames commands the way the first coalescing build did
// (version 3: renews and expiries only).
func renewFrame(cmds [][]byte) []byte {
	b := EncodeBatch(CommandBatchVersion, cmds)
	b[0] = renewBatchVersion
	return b
}

func TestApplyBatchOnePerLockAndOnlyCoalescibleOps(t *testing.T) {
	tb := NewTable()
	t1 := tb.Apply(1, acq(N, "a", "o1", "c1", 100, 1000, 0))
	t2 := tb.Apply(2, acq(N, "b", "o2", "c2", 100, 1000, 0))
	rs := tb.ApplyBatch(3, renewFrame([][]byte{
		renew(N, "a", "o1", "c1", 200, 5000).Encode(),
		renew(N, "a", "o1", "c1", 200, 9000).Encode(),  // same lock again: refused
		acq(N, "x", "o3", "c3", 200, 1000, 0).Encode(), // not allowed in a version 3 frame: refused
		renew(N, "b", "someone-else", "c9", 200, 5000).Encode(),
		{0xff}, // undecodable
		renew(N, "b", "o2", "c2", 200, 7000).Encode(), // b's first valid command... b is already taken
	}))
	want := []Result{ok(1, t1.Token), refused(CodeMalformed), refused(CodeMalformed), refused(CodeNotOwner), refused(CodeMalformed), refused(CodeMalformed)}
	if fmt.Sprint(rs) != fmt.Sprint(want) {
		t.Fatalf("results\n got %+v\nwant %+v", rs, want)
	}
	if l := tb.locks[lockID{N, "a"}]; l.leaseEnd != 5200 {
		t.Fatalf("a's lease ends at %d, want 5200 (the first renew only)", l.leaseEnd)
	}
	if l := tb.locks[lockID{N, "b"}]; l.leaseEnd != 1100 || l.token != t2.Token {
		t.Fatalf("b changed: %+v", l)
	}
	if _, ok := tb.locks[lockID{N, "x"}]; ok {
		t.Fatal("an acquire inside a version 3 frame was applied")
	}
	checkInvariants(t, tb)

	// Version 4 carries every command that touches one lock, still one per
	// lock, and refuses those that touch many.
	rs = tb.ApplyBatch(4, EncodeBatch(CommandBatchVersion, [][]byte{
		acq(N, "x", "o3", "c3", 300, 1000, 0).Encode(),
		rel(N, "a", "o1", 300).Encode(),
		acq(N, "a", "o4", "c4", 300, 1000, 0).Encode(), // a again: refused, so a is not granted twice under one token
		cancelWait(N, "b", "o5", "c5", 300).Encode(),
		Command{Op: OpCleanupConnection, NowMs: 300, ConnID: "c2"}.Encode(), // many locks: refused
		Command{Op: OpForceRelease, NowMs: 300, Kind: N, Key: "b"}.Encode(), // b again, and not groupable
	}))
	want = []Result{ok(1, tb.token(4)), ok(0, 0), refused(CodeMalformed), {Code: CodeOK, WaitPosition: -1}, refused(CodeMalformed), refused(CodeMalformed)}
	if fmt.Sprint(rs) != fmt.Sprint(want) {
		t.Fatalf("version 4 results\n got %+v\nwant %+v", rs, want)
	}
	if l := tb.locks[lockID{N, "b"}]; l == nil || l.owner != "o2" {
		t.Fatalf("b after a refused cleanup and force release: %+v", l)
	}
	if _, held := tb.locks[lockID{N, "a"}]; held {
		t.Fatal("a was granted again in the entry that released it")
	}
	checkInvariants(t, tb)
}

func TestApplyBatchHandOffTokenIsEntryIndex(t *testing.T) {
	tb := NewTable()
	tb.Apply(1, acq(N, "k", "a", "c1", 0, 100, 0))
	tb.Apply(2, acq(N, "k", "b", "c2", 10, 5000, 60000))
	tb.Apply(3, acq(N, "j", "c", "c3", 10, 5000, 0))
	rs := tb.ApplyBatch(4, EncodeBatch(CommandBatchVersion, [][]byte{
		renew(N, "k", "a", "c1", 500, 100).Encode(), // a's lease ended at 100: b gets k, a is no longer the owner
		renew(N, "j", "c", "c3", 500, 5000).Encode(),
	}))
	if len(rs) != 2 || rs[0].Code != CodeNotOwner || !rs[1].Success() {
		t.Fatalf("results %+v", rs)
	}
	notes := tb.TakeNotifications()
	if len(notes) != 1 || notes[0].Owner != "b" || notes[0].Token != tb.token(4) {
		t.Fatalf("notifications %+v, want b granted with token %d", notes, tb.token(4))
	}
}

// batched turns a command stream into log entries the way frame version 4
// allows: runs of groupable commands, one per lock, up to size per entry.
func batched(cmds []Command, size int) [][]byte {
	var entries [][]byte
	var run [][]byte
	var ids []lockID
	flush := func() {
		switch len(run) {
		case 0:
		case 1:
			entries = append(entries, run[0])
		default:
			entries = append(entries, EncodeBatch(CommandBatchVersion, run))
		}
		run, ids = nil, nil
	}
	for _, c := range cmds {
		id := lockID{c.Kind, c.Key}
		if !Groupable(c.Op) {
			flush()
			entries = append(entries, c.Encode())
			continue
		}
		if containsID(ids, id) || len(run) == size {
			flush()
		}
		run = append(run, c.Encode())
		ids = append(ids, id)
	}
	flush()
	return entries
}

// grouped turns a command stream into log entries with group commit's own
// rule (TakeEntry, EncodeEntry): size commands arrive, one entry leaves,
// and what it left behind waits for the next.
func grouped(cmds []Command, size int) [][]byte {
	self := func(c *Command) *Command { return c }
	none := func(*Command) bool { return false }
	var queue []*Command
	var entries [][]byte
	for i := 0; i < len(cmds) || len(queue) > 0; {
		for ; len(queue) < size && i < len(cmds); i++ {
			queue = append(queue, &cmds[i])
		}
		var entry []*Command
		entry, queue = TakeEntry(queue, self, none)
		entries = append(entries, EncodeEntry(entry, self))
	}
	return entries
}

// applyEntry applies an entry the way the replica's Update does.
func applyEntry(tb *Table, index uint64, e []byte) []Result {
	if IsBatch(e) {
		return tb.ApplyBatch(index, e)
	}
	return []Result{tb.ApplyEncoded(index, e)}
}

func TestCoalescedStreamsStayDeterministicAndFenced(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		// Every kind of command; odd seeds leave out those that go alone.
		var cmds []Command
		for _, c := range randomCommands(seed, 6000) {
			if Groupable(c.Op) || seed%2 == 0 {
				cmds = append(cmds, c)
			}
		}
		entries := batched(cmds, 8)
		if len(entries) >= len(cmds) {
			t.Fatalf("seed %d: no batches formed", seed)
		}
		// a and b apply the entries; c applies each command of a batch on
		// its own at the batch's index, which must come to the same thing.
		a, b, c := NewTable(), NewTable(), NewTable()
		last := map[lockID]uint64{}
		for i, e := range entries {
			idx := uint64(i + 1)
			ra, rb := applyEntry(a, idx, e), applyEntry(b, idx, e)
			if fmt.Sprint(ra) != fmt.Sprint(rb) {
				t.Fatalf("seed %d entry %d: results differ", seed, idx)
			}
			for _, r := range ra {
				if IsBatch(e) && r.Code == CodeMalformed {
					t.Fatalf("seed %d entry %d: a well-formed batch had a refused command", seed, idx)
				}
			}
			// Fencing: a token is the entry's index, so no two commands of
			// one entry may grant the same lock. (One command may grant and
			// at once give the grant up again, as a queued waiter's cancel
			// or release does when the holder's lease has just run out: that
			// grant is never held, so it is not a second holder.)
			grantedBy := map[lockID]int{}
			var rc []Result
			if IsBatch(e) {
				_, encs, _ := decodeBatch(e)
				for k, enc := range encs {
					cmd, _ := DecodeCommand(enc)
					rc = append(rc, c.Apply(idx, cmd))
					for _, n := range c.TakeNotifications() {
						id := lockID{n.Kind, n.Key}
						if prev, ok := grantedBy[id]; ok && prev != k {
							t.Fatalf("seed %d entry %d: %v granted by commands %d and %d of one entry", seed, idx, id, prev, k)
						}
						grantedBy[id] = k
					}
				}
			} else {
				rc = applyEntry(c, idx, e)
				c.TakeNotifications()
			}
			if fmt.Sprint(rc) != fmt.Sprint(ra) || !bytes.Equal(c.StateBytes(), a.StateBytes()) {
				t.Fatalf("seed %d entry %d: a batch applied differently from its commands one by one", seed, idx)
			}
			for _, n := range a.TakeNotifications() {
				if n.Token != a.token(idx) {
					t.Fatalf("seed %d entry %d: grant token %d, want the entry's %d", seed, idx, n.Token, a.token(idx))
				}
			}
			b.TakeNotifications()
			checkInvariants(t, a)
			for id, l := range a.locks {
				if l.held() {
					if l.token < last[id] {
						t.Fatalf("seed %d entry %d: token for %v went back", seed, idx, id)
					}
					last[id] = l.token
				}
			}
		}
		if !bytes.Equal(a.StateBytes(), b.StateBytes()) {
			t.Fatalf("seed %d: replicas differ", seed)
		}
	}
}

func TestNodeCoalescesRenews(t *testing.T) {
	env := &nodeEnv{dir: t.TempDir(), addr: freeAddr(t), window: 50 * time.Millisecond}
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
	results := make([]Result, locks)
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
	if l.LeaseEnd < now+90000 {
		t.Fatalf("lease ends %d, want at least %d after the renew", l.LeaseEnd, now+90000)
	}
	// A second renew of the same lock while one is being collected goes
	// into the next entry, and both succeed.
	var r1, r2 Result
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

// The window is for renews that come in quick succession: a renew more
// than a window after the previous one is proposed at once instead of
// waiting it out (a commit takes milliseconds; the window is 500 ms).
func TestNodeProposesALoneRenewAtOnce(t *testing.T) {
	const window = 500 * time.Millisecond
	env := &nodeEnv{dir: t.TempDir(), addr: freeAddr(t), window: window}
	n, db := env.start(t)
	defer db.Close()
	defer n.Close()
	propose(t, n, acq(N, "k", "o", "c1", time.Now().UnixMilli(), 60000, 0))
	for i := range 3 {
		time.Sleep(window + 100*time.Millisecond) // quiet for longer than the window
		start := time.Now()
		r := propose(t, n, renew(N, "k", "o", "c1", time.Now().UnixMilli(), 60000))
		if !r.Success() {
			t.Fatalf("lone renew %d: %+v", i, r)
		}
		if took := time.Since(start); took >= window*4/5 {
			t.Fatalf("lone renew %d took %s: it waited for the %s window", i, took, window)
		}
	}
}

func TestNodeWithCoalescingOffProposesEachRenewAlone(t *testing.T) {
	env := &nodeEnv{dir: t.TempDir(), addr: freeAddr(t), window: -1} // --coalesce-window 0
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
	env := &nodeEnv{dir: t.TempDir(), addr: freeAddr(t), window: time.Hour}
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
	env := &nodeEnv{dir: t.TempDir(), addr: freeAddr(t), window: time.Hour}
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
	run := func(op func(i int) Command, check func(i int, r Result) bool) {
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
	run(func(i int) Command {
		return acq(N, fmt.Sprint("own", i), fmt.Sprint("o", i), "c1", time.Now().UnixMilli(), 60000, 0)
	}, func(_ int, r Result) bool { return r.Success() && r.Count == 1 && r.Token > 0 })
	run(func(i int) Command {
		return acq(R, "shared", fmt.Sprint("o", i), "c1", time.Now().UnixMilli(), 60000, 60000)
	}, func(_ int, r Result) bool { return r.Success() || (r.Code == CodeHeld && r.WaitPosition >= 0) })
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
	for id := uint64(1); id <= 3; id++ {
		db, err := storage.Open(storage.Config{Dir: filepath.Join(dir, fmt.Sprint(id), "locks")})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		n, err := Start(RaftConfig{NodeHostDir: filepath.Join(dir, fmt.Sprint(id), "raft"), RaftAddress: members[id],
			ReplicaID: id, Members: members, ElectionRTT: 50, HeartbeatRTT: 5}, db, nil, zerolog.Nop())
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		nodes = append(nodes, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, n := range nodes {
		if err := n.WaitReady(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var before uint64
	if s, err := nodes[0].Stats(); err == nil {
		before = s.Applied
	}
	var wg sync.WaitGroup
	var proposed sync.WaitGroup
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
				var cmd Command
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
				pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := n.Propose(pctx, cmd)
				cancel()
				if err != nil {
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
		if _, err := n.nh.SyncRead(ctx, n.cfg.ShardID, StatsQuery{}); err != nil {
			t.Fatal(err)
		}
		v, err := n.nh.StaleRead(n.cfg.ShardID, StateQuery{})
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
	t.Logf("%d commands in %d entries", clients*rounds, s.Applied-before)
}

// TestSecondEntryOnlyForAFollower pins the in-flight rule (groupInFlight):
// with one entry in flight, queued commands for other locks wait for it,
// and a command for a lock in that entry opens the second slot.
func TestSecondEntryOnlyForAFollower(t *testing.T) {
	cmd := func(op Op, key string) *pendingCmd {
		return &pendingCmd{cmd: Command{Op: op, Kind: KindNonReentrant, Key: key}}
	}
	g := &groupCommit{}
	if !g.slotFree() {
		t.Fatal("nothing in flight: the slot must be free")
	}
	g.flying = []*submitted{{batch: []*pendingCmd{cmd(OpAcquire, "a"), cmd(OpAcquire, "b")}}}
	g.queue = []*pendingCmd{cmd(OpAcquire, "c"), cmd(OpRelease, "d")}
	g.following = g.queueFollows()
	if g.slotFree() {
		t.Fatal("one entry in flight and only other locks queued: the second slot must stay shut")
	}
	g.queue = append(g.queue, cmd(OpRelease, "b"))
	g.following = g.queueFollows()
	if !g.slotFree() {
		t.Fatal("a queued release of a lock in the entry in flight must open the second slot")
	}
	g.queue[2].cmd.Kind = KindReentrant // same key, another kind: another lock
	g.following = g.queueFollows()
	if g.slotFree() {
		t.Fatal("same key of another kind is another lock: the slot must stay shut")
	}
	g.following = true
	g.flying = append(g.flying, &submitted{batch: []*pendingCmd{cmd(OpRelease, "b")}})
	if g.slotFree() {
		t.Fatalf("%d entries in flight: no third", groupInFlight)
	}
}
