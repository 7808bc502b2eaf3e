package statemachine

import (
	"bytes"
	"fmt"
	"testing"
)

func claimCmd(kind Kind, key, owner, conn string, now, lease int64, token uint64) Command {
	return Command{Op: OpClaim, NowMs: now, Kind: kind, Key: key, Owner: owner, ConnID: conn, LeaseMs: lease, Token: token}
}

// A claim answered from a read holds the lock for its lease from the read,
// which the record names, however late the record applies: counted from
// the clock at the record's apply (where other commands moved it on
// meanwhile), the table kept the lock past the lease the client was told,
// and the next waiter got it late (chaos seed 20261201: a queue position
// one too far back). A CLAIM without LeaseAtNow, as older builds wrote it,
// still counts from the clock when replayed.
func TestClaimLeaseRunsFromTheRead(t *testing.T) {
	for _, atNow := range []bool{true, false} {
		tb := NewTable()
		tb.Apply(1, acq(R, "k", "a", "c1", 100, 1000, 0))
		tb.Apply(2, acq(R, "k", "b", "c2", 110, 2000, 60000)) // queued
		tb.Apply(3, rel(R, "k", "a", 120))                    // b granted, unclaimed, token 3
		read := tb.Lock(R, "k")
		if !read.Unclaimed || read.Owner != "b" || read.Clock != 120 {
			t.Fatalf("read: %+v", read)
		}
		tb.Apply(4, acq(R, "other", "x", "c3", 900, 1000, 0)) // the clock moves on before the record
		rec := claimCmd(R, "k", "b", "c2", max(125, read.Clock), 1000, read.Token)
		rec.LeaseAtNow = atNow
		if r := tb.Apply(5, rec); !r.Success() || r.Count != 1 || r.Token != 3 {
			t.Fatalf("claim: %+v", r)
		}
		want := int64(125 + 1000)
		if !atNow {
			want = 900 + 1000
		}
		if got := tb.Lock(R, "k").LeaseEndMs; got != want {
			t.Fatalf("LeaseAtNow %v: lease ends at %d, want %d", atNow, got, want)
		}
		// The next command after the lease (clock 1130) finds the lock over.
		if atNow {
			if r := tb.Apply(6, acq(R, "k", "z", "c9", want+5, 1000, 0)); !r.Success() {
				t.Fatalf("acquire after the claimed lease ended: %+v", r)
			}
		}
	}
}

func TestClaimRecordsOnlyTheGrantItNames(t *testing.T) {
	tb := run(t, []step{
		{acq(R, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
		{acq(R, "k", "b", "c2", 110, 2000, 60000), queued(0)},
		{rel(R, "k", "a", 120), ok(0, 0)},                                  // index 3: b granted, unclaimed, token 3
		{claimCmd(R, "k", "c", "c3", 130, 5000, 3), refused(CodeNotFound)}, // not b
		{claimCmd(R, "k", "b", "c2", 130, 5000, 2), refused(CodeNotFound)}, // another grant
		{claimCmd(R, "k", "b", "c2", 130, 5000, 3), ok(1, 3)},
		{claimCmd(R, "k", "b", "c2", 140, 5000, 3), refused(CodeNotFound)}, // already claimed
		{acq(R, "k", "b", "c2", 150, 5000, 0), ok(2, 3)},                   // re-entry after the claim
		{cancelWait(R, "k", "b", "c2", 160), Result{Code: CodeOK, WaitPosition: -1}},
	})
	l := tb.Lock(R, "k")
	if l.Owner != "b" || l.Unclaimed || l.Count != 2 || l.LeaseEndMs != 5150 {
		t.Fatalf("after claim, re-entry and cancel: %+v", l)
	}
	// A claim of a grant whose lease ran out finds the lock passed on.
	tb = run(t, []step{
		{acq(N, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
		{acq(N, "k", "b", "c2", 110, 50, 60000), queued(0)},
		{acq(N, "k", "c", "c3", 110, 50, 60000), queued(1)},
		{rel(N, "k", "a", 120), ok(0, 0)},                                  // b granted until 170
		{claimCmd(N, "k", "b", "c2", 200, 5000, 4), refused(CodeNotFound)}, // b's lease is over: c has it
	})
	if l := tb.Lock(N, "k"); l.Owner != "c" || !l.Unclaimed || l.Token != 5 {
		t.Fatalf("after a late claim: %+v", l)
	}
}

// A claim answered from a read on c2, then the owner reconnects and
// renews on c3 before the CLAIM applies (a renew on another node can be
// committed first). Sequentially the claim came first and the renew
// after it, so the lock is the owner's on c3 with the renew's lease, and
// the cleanup of c2 must not free it. From LevelOwnerMoves the renew
// claims the grant and the CLAIM then changes nothing; below it every
// replica keeps the old rule (bound back to c2, freed by c2's cleanup), so
// a cluster that has not raised its level stays identical.
func TestClaimAfterTheOwnersRenewElsewhere(t *testing.T) {
	for _, level := range []int{LevelGate, LevelOwnerMoves} {
		tb := NewTable()
		if o, _ := tb.ApplyLevel(1, EncodeLevel(level)); o != LevelRaised {
			t.Fatalf("level %d: %v", level, o)
		}
		steps := []step{
			{acq(R, "k", "a", "c1", 100, 1000, 0), ok(1, 2)},
			{acq(R, "k", "b", "c2", 110, 2000, 60000), queued(0)},
			{rel(R, "k", "a", 120), ok(0, 0)},               // index 4: b granted on c2, unclaimed, token 4
			{renew(R, "k", "b", "c3", 130, 5000), ok(1, 4)}, // after the read on c2 answered the claim
			{func() Command { c := claimCmd(R, "k", "b", "c2", 125, 2000, 4); c.LeaseAtNow = true; return c }(), ok(1, 4)},
		}
		for i, s := range steps {
			if r := tb.Apply(uint64(i+2), s.cmd); r != s.want {
				t.Fatalf("level %d, %s: %+v, want %+v", level, s.cmd.Op, r, s.want)
			}
			checkInvariants(t, tb)
			if s.cmd.Op == OpRenew && tb.Lock(R, "k").Unclaimed != (level < LevelOwnerMoves) {
				t.Fatalf("level %d: after the renew from c3: %+v", level, tb.Lock(R, "k"))
			}
		}
		l := tb.Lock(R, "k")
		if l.Unclaimed || l.Owner != "b" {
			t.Fatalf("level %d: after the CLAIM: %+v", level, l)
		}
		wantConn, wantEnd := "c3", int64(130+5000)
		if level < LevelOwnerMoves {
			wantConn, wantEnd = "c2", 125+2000
		}
		if l.ConnID != wantConn || l.LeaseEndMs != wantEnd {
			t.Fatalf("level %d: the grant is on %s until %d, want %s until %d", level, l.ConnID, l.LeaseEndMs, wantConn, wantEnd)
		}
		tb.Apply(uint64(len(steps)+2), cleanup("c2", 200))
		l = tb.Lock(R, "k")
		if level >= LevelOwnerMoves && (l.Owner != "b" || l.ConnID != "c3") {
			t.Fatalf("level %d: c2's cleanup took the lock from its owner renewing on c3: %+v", level, l)
		}
		if level < LevelOwnerMoves && l.Owner != "" {
			t.Fatalf("level %d: the old rule changed: %+v", level, l)
		}
		// On its new connection the owner re-enters (count 2: the claim is
		// in effect) and releases twice.
		if level >= LevelOwnerMoves {
			for i, s := range []step{
				{acq(R, "k", "b", "c3", 205, 5000, 0), ok(2, 4)},
				{rel(R, "k", "b", 210), ok(1, 0)},
				{rel(R, "k", "b", 211), ok(0, 0)},
			} {
				if r := tb.Apply(uint64(len(steps)+3+i), s.cmd); r != s.want {
					t.Fatalf("on c3, %s: %+v, want %+v", s.cmd.Op, r, s.want)
				}
			}
		}
	}
}

// A fresh ACQUIRE (no waiterRetry) from the owner of an unclaimed grant
// on another connection: from LevelOwnerMoves it changes nothing and
// answers CodeClaimPending (the gateway proposes it again); a claim
// (retry) from any connection, and a fresh ACQUIRE on the grant's own,
// still claim. Once the grant is claimed the fresh ACQUIRE is a re-entry
// (count 2 for REENTRANT, refused for NON_REENTRANT). Below the level it
// claims, as before.
func TestFreshAcquireFromAnotherConnectionWaitsForTheClaim(t *testing.T) {
	for _, level := range []int{LevelGate, LevelOwnerMoves} {
		for _, kind := range []Kind{R, N} {
			tb := NewTable()
			tb.ApplyLevel(1, EncodeLevel(level))
			for i, s := range []step{
				{acq(kind, "k", "a", "c1", 100, 1000, 0), ok(1, 2)},
				{acq(kind, "k", "b", "c2", 110, 2000, 60000), queued(0)},
				{rel(kind, "k", "a", 120), ok(0, 0)}, // index 4: b granted on c2, unclaimed
			} {
				if r := tb.Apply(uint64(i+2), s.cmd); r != s.want {
					t.Fatalf("level %d %s step %d: %+v, want %+v", level, kind, i, r, s.want)
				}
			}
			fresh := acq(kind, "k", "b", "c3", 130, 3000, 0)
			r := tb.Apply(5, fresh)
			if level < LevelOwnerMoves {
				if r != ok(1, 4) || tb.Lock(kind, "k").ConnID != "c3" {
					t.Fatalf("level %d %s: the old rule changed: %+v", level, kind, r)
				}
				continue
			}
			if r != refused(CodeClaimPending) {
				t.Fatalf("%s: fresh ACQUIRE from c3 on b's unclaimed grant: %+v", kind, r)
			}
			if l := tb.Lock(kind, "k"); !l.Unclaimed || l.ConnID != "c2" || l.LeaseEndMs != 120+2000 {
				t.Fatalf("%s: the pending ACQUIRE changed the grant: %+v", kind, l)
			}
			// The claim arrives (here the CLAIM recording one answered from
			// a read on c2); the fresh ACQUIRE proposed again is a re-entry.
			c := claimCmd(kind, "k", "b", "c2", 125, 2000, 4)
			c.LeaseAtNow = true
			if r := tb.Apply(6, c); r != ok(1, 4) {
				t.Fatalf("%s: claim: %+v", kind, r)
			}
			fresh.NowMs = 140
			want := ok(2, 4)
			if kind == N {
				want = refused(CodeHeld)
			}
			if r := tb.Apply(7, fresh); r != want {
				t.Fatalf("%s: fresh ACQUIRE after the claim: %+v, want %+v", kind, r, want)
			}
			checkInvariants(t, tb)
		}
	}
	// A claim (a retry) from another connection, and a fresh ACQUIRE on
	// the grant's own connection, claim as before.
	for _, claim := range []Command{
		func() Command { c := acq(R, "k", "b", "c3", 130, 3000, 60000); c.Retry = true; return c }(),
		acq(R, "k", "b", "c2", 130, 3000, 0),
	} {
		tb := NewTable()
		tb.ApplyLevel(1, EncodeLevel(LevelOwnerMoves))
		tb.Apply(2, acq(R, "k", "a", "c1", 100, 1000, 0))
		tb.Apply(3, acq(R, "k", "b", "c2", 110, 2000, 60000))
		tb.Apply(4, rel(R, "k", "a", 120))
		if r := tb.Apply(5, claim); r != ok(1, 4) {
			t.Fatalf("claim on %s (retry %v): %+v", claim.ConnID, claim.Retry, r)
		}
		if l := tb.Lock(R, "k"); l.Unclaimed || l.ConnID != claim.ConnID {
			t.Fatalf("after the claim on %s: %+v", claim.ConnID, l)
		}
	}
}

// A CANCEL_WAIT from the owner of an unclaimed grant on another
// connection: it may follow a claim answered from a read on the grant's
// connection, after which it must keep the lock. From LevelOwnerMoves it
// waits (CodeClaimPending, no change) until the grant is claimed (then it
// keeps the lock) or gone; below, it gives the grant up at once.
func TestCancelFromAnotherConnectionWaitsForTheClaim(t *testing.T) {
	setup := func(level int) *Table {
		tb := NewTable()
		tb.ApplyLevel(1, EncodeLevel(level))
		tb.Apply(2, acq(R, "k", "a", "c1", 100, 1000, 0))
		tb.Apply(3, acq(R, "k", "b", "c2", 110, 2000, 60000))
		tb.Apply(4, acq(R, "k", "z", "c9", 111, 2000, 60000))
		tb.Apply(5, rel(R, "k", "a", 120)) // b granted on c2, unclaimed, token 5; z queued
		return tb
	}
	done := Result{Code: CodeOK, WaitPosition: -1}
	tb := setup(LevelGate)
	if r := tb.Apply(6, cancelWait(R, "k", "b", "c3", 130)); r != done || tb.Lock(R, "k").Owner != "z" {
		t.Fatalf("level 2: the cancel from c3 did not give the grant up: %+v %+v", r, tb.Lock(R, "k"))
	}
	tb = setup(LevelOwnerMoves)
	if r := tb.Apply(6, cancelWait(R, "k", "b", "c3", 130)); r != refused(CodeClaimPending) {
		t.Fatalf("cancel from c3 before the claim: %+v", r)
	}
	if l := tb.Lock(R, "k"); l.Owner != "b" || !l.Unclaimed || len(l.Waiters) != 1 {
		t.Fatalf("the pending cancel changed the lock: %+v", l)
	}
	c := claimCmd(R, "k", "b", "c2", 125, 2000, 5)
	c.LeaseAtNow = true
	if r := tb.Apply(7, c); r != ok(1, 5) {
		t.Fatalf("claim: %+v", r)
	}
	if r := tb.Apply(8, cancelWait(R, "k", "b", "c3", 140)); r != done {
		t.Fatalf("cancel after the claim: %+v", r)
	}
	if l := tb.Lock(R, "k"); l.Owner != "b" || l.Unclaimed {
		t.Fatalf("the cancel after the claim gave the lock up: %+v", l)
	}
	// Never claimed: once the grant's connection is cleaned up the grant
	// is gone, and the cancel proposed again changes nothing more.
	tb = setup(LevelOwnerMoves)
	tb.Apply(6, cleanup("c2", 130))
	if r := tb.Apply(7, cancelWait(R, "k", "b", "c3", 140)); r != done || tb.Lock(R, "k").Owner != "z" {
		t.Fatalf("cancel after c2's cleanup: %+v %+v", r, tb.Lock(R, "k"))
	}
	checkInvariants(t, tb)
}

// The gateway answers a claim from a read and records it with CLAIM; the
// rule holds only if that leaves every table exactly as the ACQUIRE that
// claims would. Random streams, and before a third of their commands every
// unclaimed grant is claimed by its owner on its connection: one table
// applies the ACQUIRE, the other the CLAIM the gateway would send instead.
// Odd seeds run at this build's level (level 3's rules for an owner on
// another connection: the streams' owners use any of three).
func TestClaimRecordEqualsTheAcquireThatClaims(t *testing.T) {
	claims := 0
	for seed := uint64(1); seed <= 20; seed++ {
		a, b := NewTable(), NewTable()
		var idx uint64
		if seed%2 == 1 {
			idx++
			a.ApplyLevel(idx, EncodeLevel(MaxLevel))
			b.ApplyLevel(idx, EncodeLevel(MaxLevel))
		}
		apply := func(ca, cb Command) {
			idx++
			ra, rb := a.Apply(idx, ca), b.Apply(idx, cb)
			if cb.Op == OpClaim && (ra != rb || !ra.Success() || ra.Count != 1) {
				t.Fatalf("seed %d entry %d: acquire %+v, claim %+v", seed, idx, ra, rb)
			}
			if cb.Op != OpClaim && ra != rb {
				t.Fatalf("seed %d entry %d (%s): results %+v and %+v", seed, idx, ca.Op, ra, rb)
			}
			if fmt.Sprint(a.TakeNotifications()) != fmt.Sprint(b.TakeNotifications()) {
				t.Fatalf("seed %d entry %d: notifications differ", seed, idx)
			}
			if !bytes.Equal(a.StateBytes(), b.StateBytes()) {
				t.Fatalf("seed %d entry %d (%s): tables differ", seed, idx, ca.Op)
			}
		}
		for i, c := range randomCommands(seed, 3000) {
			if i%3 == 0 {
				var ids []lockID
				a.locks.Ascend(func(l *lockState) bool { ids = append(ids, l.id()); return true })
				for _, id := range ids {
					l := a.get(id)
					if !l.unclaimed || max(a.clock, c.NowMs) > l.leaseEnd {
						continue // the gateway's read would not answer it
					}
					acquire := Command{Op: OpAcquire, NowMs: c.NowMs, Kind: id.kind, Key: id.key, Owner: l.owner, ConnID: l.connID, LeaseMs: 700, Retry: true}
					// As the gateway writes it: from the clock its read saw.
					rec := claimCmd(id.kind, id.key, l.owner, l.connID, max(a.clock, c.NowMs), 700, l.token)
					rec.LeaseAtNow = true
					apply(acquire, rec)
					claims++
				}
			}
			apply(c, c)
		}
	}
	if claims < 200 {
		t.Fatalf("only %d claims in the streams: the test proves little", claims)
	}
	t.Logf("%d claims recorded", claims)
}

// Group commit lets a lock have several commands in an entry, an ACQUIRE
// only last (frame version 5). Random streams with the gateway's claims in
// them, grouped by group commit's own take: every grouped entry applies
// exactly as its commands one by one at its index, and no (lock, token)
// ever belongs to two owners, whether told by a reply (ACQUIRE, RENEW,
// CLAIM) or holding it when an entry ends.
func TestSharedLockEntriesStayFenced(t *testing.T) {
	pairs := 0
	for seed := uint64(1); seed <= 20; seed++ {
		// The stream is built against a table that applies it one by one,
		// so that the claims name real unclaimed grants, as the gateway's
		// read would find them.
		probe := NewTable()
		var stream []Command
		var idx uint64
		for i, c := range randomCommands(seed, 3000) {
			if i%3 == 0 {
				var ids []lockID
				probe.locks.Ascend(func(l *lockState) bool { ids = append(ids, l.id()); return true })
				for _, id := range ids {
					l := probe.get(id)
					if !l.unclaimed || max(probe.clock, c.NowMs) > l.leaseEnd {
						continue
					}
					cl := claimCmd(id.kind, id.key, l.owner, l.connID, c.NowMs, 700, l.token)
					idx++
					probe.Apply(idx, cl)
					stream = append(stream, cl)
				}
			}
			idx++
			probe.Apply(idx, c)
			stream = append(stream, c)
		}
		entries := grouped(stream, 8)
		a, one := NewTable(), NewTable()
		owners := map[string]string{} // lock and token -> owner
		own := func(entry uint64, id lockID, token uint64, owner string) {
			k := fmt.Sprint(id, "/", token)
			if o, ok := owners[k]; ok && o != owner {
				t.Fatalf("seed %d entry %d: %v token %d belongs to %s and %s", seed, entry, id, token, o, owner)
			}
			owners[k] = owner
		}
		for i, e := range entries {
			idx := uint64(i + 1)
			ra := applyEntry(a, idx, e)
			var encs [][]byte
			if IsBatch(e) {
				var v byte
				v, encs, _ = decodeBatch(e)
				if v == SharedLockBatchVersion {
					pairs++
				}
			} else {
				encs = [][]byte{e}
			}
			var rs []Result
			for k, enc := range encs {
				cmd, _ := DecodeCommand(enc)
				r := one.Apply(idx, cmd)
				rs = append(rs, r)
				if IsBatch(e) && ra[k].Code == CodeMalformed {
					t.Fatalf("seed %d entry %d: a well-formed batch refused %s", seed, idx, cmd.Op)
				}
				if r.Success() && (cmd.Op == OpClaim || cmd.Op == OpRenew || (cmd.Op == OpAcquire && r.WaitPosition < 0)) {
					own(idx, lockID{cmd.Kind, cmd.Key}, r.Token, cmd.Owner)
				}
			}
			if fmt.Sprint(rs) != fmt.Sprint(ra) || !bytes.Equal(one.StateBytes(), a.StateBytes()) {
				t.Fatalf("seed %d entry %d: a batch applied differently from its commands one by one", seed, idx)
			}
			a.TakeNotifications()
			one.TakeNotifications()
			checkInvariants(t, a)
			for id, l := range a.lockMap() {
				if l.held() {
					own(idx, id, l.token, l.owner)
				}
			}
		}
	}
	if pairs < 100 {
		t.Fatalf("only %d entries gave a lock more than one command: the test proves little", pairs)
	}
	t.Logf("%d entries gave a lock more than one command", pairs)
}
