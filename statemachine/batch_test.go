package statemachine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestBatchFrameRoundTripAndRejects(t *testing.T) {
	cmds := [][]byte{renew(N, "a", "o", "c", 1, 10).Encode(), expire(N, "b", 3, 2).Encode()}
	got, err := decodeBatch(encodeBatch(cmds))
	if err != nil || len(got) != 2 || !bytes.Equal(got[0], cmds[0]) || !bytes.Equal(got[1], cmds[1]) {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	good := encodeBatch(cmds)
	tooMany := make([][]byte, MaxBatch+1)
	for i := range tooMany {
		tooMany[i] = cmds[0]
	}
	for name, frame := range map[string][]byte{
		"empty":            {},
		"version only":     {commandBatchVersion},
		"no commands":      {commandBatchVersion, 0},
		"too many":         encodeBatch(tooMany),
		"truncated":        good[:len(good)-1],
		"trailing":         append(bytes.Clone(good), 0),
		"length past end":  {commandBatchVersion, 1, 50, 1},
		"single cmd bytes": cmds[0],
	} {
		if _, err := decodeBatch(frame); !errors.Is(err, errMalformed) {
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

func TestApplyBatchOnePerLockAndOnlyCoalescibleOps(t *testing.T) {
	tb := NewTable()
	t1 := tb.Apply(1, acq(N, "a", "o1", "c1", 100, 1000, 0))
	t2 := tb.Apply(2, acq(N, "b", "o2", "c2", 100, 1000, 0))
	rs := tb.ApplyBatch(3, encodeBatch([][]byte{
		renew(N, "a", "o1", "c1", 200, 5000).Encode(),
		renew(N, "a", "o1", "c1", 200, 9000).Encode(),  // same lock again: refused
		acq(N, "x", "o3", "c3", 200, 1000, 0).Encode(), // not coalescible: refused
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
		t.Fatal("an acquire inside a batch was applied")
	}
	checkInvariants(t, tb)
}

func TestApplyBatchHandOffTokenIsEntryIndex(t *testing.T) {
	tb := NewTable()
	tb.Apply(1, acq(N, "k", "a", "c1", 0, 100, 0))
	tb.Apply(2, acq(N, "k", "b", "c2", 10, 5000, 60000))
	tb.Apply(3, acq(N, "j", "c", "c3", 10, 5000, 0))
	rs := tb.ApplyBatch(4, encodeBatch([][]byte{
		renew(N, "k", "a", "c1", 500, 100).Encode(), // a's lease ended at 100: b gets k, a is no longer the owner
		renew(N, "j", "c", "c3", 500, 5000).Encode(),
	}))
	if len(rs) != 2 || rs[0].Code != CodeNotOwner || !rs[1].Success() {
		t.Fatalf("results %+v", rs)
	}
	notes := tb.takeNotifications()
	if len(notes) != 1 || notes[0].Owner != "b" || notes[0].Token != tb.token(4) {
		t.Fatalf("notifications %+v, want b granted with token %d", notes, tb.token(4))
	}
}

// batched turns a command stream into log entries the way the coalescer
// would: runs of coalescible commands, one per lock, up to size per entry.
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
			entries = append(entries, encodeBatch(run))
		}
		run, ids = nil, nil
	}
	for _, c := range cmds {
		id := lockID{c.Kind, c.Key}
		if !coalescible(c.Op) {
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

// applyEntry applies an entry the way the replica's Update does.
func applyEntry(tb *Table, index uint64, e []byte) []Result {
	if isBatch(e) {
		return tb.ApplyBatch(index, e)
	}
	return []Result{tb.ApplyEncoded(index, e)}
}

func TestCoalescedStreamsStayDeterministicAndFenced(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		// Mostly renews and expiries, so batches form.
		var cmds []Command
		for _, c := range randomCommands(seed, 6000) {
			if coalescible(c.Op) || c.Op == OpAcquire || seed%2 == 0 {
				cmds = append(cmds, c)
			}
		}
		entries := batched(cmds, 8)
		if len(entries) >= len(cmds) {
			t.Fatalf("seed %d: no batches formed", seed)
		}
		a, b := NewTable(), NewTable()
		last := map[lockID]uint64{}
		for i, e := range entries {
			idx := uint64(i + 1)
			ra, rb := applyEntry(a, idx, e), applyEntry(b, idx, e)
			if fmt.Sprint(ra) != fmt.Sprint(rb) {
				t.Fatalf("seed %d entry %d: results differ", seed, idx)
			}
			for _, r := range ra {
				if isBatch(e) && r.Code == CodeMalformed {
					t.Fatalf("seed %d entry %d: a well-formed batch had a refused command", seed, idx)
				}
			}
			granted := map[lockID]int{}
			for _, n := range a.takeNotifications() {
				id := lockID{n.Kind, n.Key}
				if granted[id]++; granted[id] > 1 && isBatch(e) {
					t.Fatalf("seed %d entry %d: %v granted twice in one coalesced entry", seed, idx, id)
				}
				if n.Token != a.token(idx) {
					t.Fatalf("seed %d entry %d: grant token %d, want the entry's %d", seed, idx, n.Token, a.token(idx))
				}
			}
			b.takeNotifications()
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
