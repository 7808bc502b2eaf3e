package statemachine

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
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
	if l := tb.get(lockID{N, "a"}); l.leaseEnd != 5200 {
		t.Fatalf("a's lease ends at %d, want 5200 (the first renew only)", l.leaseEnd)
	}
	if l := tb.get(lockID{N, "b"}); l.leaseEnd != 1100 || l.token != t2.Token {
		t.Fatalf("b changed: %+v", l)
	}
	if _, ok := tb.lookup(lockID{N, "x"}); ok {
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
	if l := tb.get(lockID{N, "b"}); l == nil || l.owner != "o2" {
		t.Fatalf("b after a refused cleanup and force release: %+v", l)
	}
	if _, held := tb.lookup(lockID{N, "a"}); held {
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
			for id, l := range a.lockMap() {
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
