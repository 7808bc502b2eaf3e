package chaos

import (
	"testing"

	"github.com/anishathalye/porcupine"
)

// Hand-written histories the model must accept or reject. Times are ms.

type histBuilder struct {
	ops []porcupine.Operation
}

func (b *histBuilder) add(in lockInput, out lockOutput) *histBuilder {
	ret := in.Ret
	pret := ret * 1e6
	if out.Out == outUnknown {
		in.Ret = never
		pret = 1 << 50
	}
	b.ops = append(b.ops, porcupine.Operation{ClientId: int(in.Owner), Input: in, Call: in.Call * 1e6, Output: out, Return: pret,
		Metadata: opMeta{Lock: "NON_REENTRANT/k"}})
	return b
}

// The helpers put owner s on session s; a test that moves an owner sets
// Sess itself.
func acq(s int32, call, ret, lease int64) lockInput {
	return lockInput{Op: opAcquire, Owner: s, Sess: s, Lease: lease, Call: call, Ret: ret}
}

func acqWait(s int32, call, ret, lease, wait int64) lockInput {
	in := acq(s, call, ret, lease)
	in.Wait = wait
	return in
}

func rel(s int32, call, ret int64) lockInput {
	return lockInput{Op: opRelease, Owner: s, Sess: s, Call: call, Ret: ret}
}

func granted(count int32, tok uint64) lockOutput {
	return lockOutput{Out: outGranted, Count: count, Token: tok}
}

func released(count int32) lockOutput { return lockOutput{Out: outOK, Count: count} }

var (
	held    = lockOutput{Out: outHeld}
	unknown = lockOutput{Out: outUnknown}
	ok      = lockOutput{Out: outOK}
)

// Replies as the Java Gen 1 client sees them: booleans only.
var (
	blindTrue  = lockOutput{Out: outGranted, Blind: true}
	blindHeld  = lockOutput{Out: outHeld, Blind: true}
	blindOK    = lockOutput{Out: outOK, Blind: true}
	blindFalse = lockOutput{Out: outRefused, Blind: true}
)

func queued(pos int32) lockOutput { return lockOutput{Out: outQueued, Pos: pos} }

// handedToOne starts a history in which owner 0 holds the lock and
// releases it to owner 1, queued on session 1: an unclaimed grant.
func handedToOne() *histBuilder {
	return new(histBuilder).
		add(acq(0, 0, 2, 10000), granted(1, 5)).
		add(acqWait(1, 10, 11, 10000, 50000), queued(0)).
		add(rel(0, 20, 21), released(0))
}

// check runs the model over b; lost maps a session to when it was lost.
func check(t *testing.T, lost map[int32]int64, b *histBuilder) porcupine.CheckResult {
	t.Helper()
	if lost == nil {
		lost = map[int32]int64{}
	}
	m := lockModel(modelParams{skew: clockSkew{base: baseSlackMs}, lostAt: lost})
	return porcupine.CheckOperationsTimeout(m, b.ops, 0)
}

func TestModelAccepts(t *testing.T) {
	for name, tc := range map[string]struct {
		lost map[int32]int64
		h    *histBuilder
	}{
		"release then grant": {h: new(histBuilder).
			add(acq(0, 0, 2, 1000), granted(1, 5)).
			add(acq(1, 10, 12, 1000), held).
			add(rel(0, 20, 22), released(0)).
			add(acq(1, 30, 32, 1000), granted(1, 9)).
			add(rel(0, 40, 41), lockOutput{Out: outNotOwner}).
			add(rel(1, 50, 51), released(0)).
			add(rel(1, 60, 61), lockOutput{Out: outNotFound})},
		"lease ends": {h: new(histBuilder).
			add(acq(0, 0, 2, 100), granted(1, 5)).
			add(acq(1, 150, 152, 1000), granted(1, 9)).
			add(rel(0, 160, 161), lockOutput{Out: outNotOwner})},
		"grant concurrent with release": {h: new(histBuilder).
			add(acq(0, 0, 2, 1000), granted(1, 5)).
			add(acq(1, 10, 30, 1000), granted(1, 9)).
			add(rel(0, 20, 40), released(0))},
		"renew extends": {h: new(histBuilder).
			add(acq(0, 0, 2, 100), granted(1, 5)).
			add(lockInput{Op: opRenew, Owner: 0, Lease: 1000, Call: 50, Ret: 51}, ok).
			add(acq(1, 500, 501, 1000), held)},
		"fifo hand-off and claim": {h: new(histBuilder).
			add(acq(0, 0, 2, 1000), granted(1, 5)).
			add(acqWait(1, 10, 11, 1000, 5000), queued(0)).
			add(acqWait(2, 20, 21, 1000, 5000), queued(1)).
			add(rel(0, 30, 31), released(0)).
			add(lockInput{Op: opNotify, Owner: 1, Call: 10, Ret: 40}, ok).
			add(acqWait(2, 42, 43, 1000, 5000), queued(0)).
			add(acqWait(1, 41, 45, 1000, 5000), granted(1, 31))},
		// The gateway pushes ahead of a release's commit; the guess can be
		// overtaken (here the release is refused: the holder is someone
		// else by then), and the waiter's claim finds it still queued.
		"push ahead to a waiter that is not granted": {h: new(histBuilder).
			add(acq(0, 0, 2, 1000), granted(1, 5)).
			add(acqWait(1, 10, 11, 1000, 5000), queued(0)).
			add(lockInput{Op: opNotify, Owner: 1, Call: 10, Ret: 40}, ok).
			add(acqWait(1, 41, 42, 1000, 5000), queued(0))},
		"unclaimed grant expires": {h: new(histBuilder).
			add(acq(0, 0, 2, 1000), granted(1, 5)).
			add(acqWait(1, 10, 11, 100, 5000), queued(0)).
			add(rel(0, 30, 31), released(0)).
			add(acq(2, 300, 301, 1000), granted(1, 40))},
		"dead waiter skipped": {h: new(histBuilder).
			add(acq(0, 0, 2, 1000), granted(1, 5)).
			add(acqWait(1, 10, 11, 1000, 50), queued(0)).
			add(acqWait(2, 20, 21, 1000, 5000), queued(1)).
			add(rel(0, 300, 301), released(0)).
			add(acqWait(2, 310, 311, 1000, 5000), granted(1, 300))},
		"connection cleanup frees": {lost: map[int32]int64{0: 50}, h: new(histBuilder).
			add(acq(0, 0, 2, 10000), granted(1, 5)).
			add(acq(1, 60, 61, 1000), granted(1, 9))},
		// Owner 0 reconnects (session 5) and renews there; its first
		// session's cleanup then leaves the lock alone.
		"renew from a new connection keeps the lock": {lost: map[int32]int64{0: 50}, h: new(histBuilder).
			add(acq(0, 0, 2, 10000), granted(1, 5)).
			add(lockInput{Op: opRenew, Owner: 0, Sess: 5, Lease: 10000, Call: 10, Ret: 11}, ok).
			add(acq(1, 60, 61, 1000), held).
			add(lockInput{Op: opRelease, Owner: 0, Sess: 5, Call: 70, Ret: 71}, released(0)).
			add(acq(1, 80, 81, 1000), granted(1, 70))},
		// The same after a claim: a waiter queued on session 1 claims the
		// grant there, then renews from session 6 before session 1 is gone
		// (the order a claim recorded after that renew must keep).
		"claimed grant moved by a renew": {lost: map[int32]int64{1: 60}, h: handedToOne().
			add(lockInput{Op: opNotify, Owner: 1, Call: 10, Ret: 30}, ok).
			add(lockInput{Op: opAcquire, Owner: 1, Sess: 1, Lease: 10000, Wait: 50000, Retry: true, Call: 31, Ret: 32}, granted(1, 20)).
			add(lockInput{Op: opRenew, Owner: 1, Sess: 6, Lease: 10000, Call: 40, Ret: 41}, ok).
			add(acq(2, 100, 101, 1000), held).
			add(lockInput{Op: opRelease, Owner: 1, Sess: 6, Call: 110, Ret: 111}, released(0))},
		// The lock moved to session 5, so session 5's loss frees it.
		"moved lock freed with its new connection": {lost: map[int32]int64{5: 50}, h: new(histBuilder).
			add(acq(0, 0, 2, 10000), granted(1, 5)).
			add(lockInput{Op: opRenew, Owner: 0, Sess: 5, Lease: 10000, Call: 10, Ret: 11}, ok).
			add(acq(1, 60, 61, 1000), granted(1, 60))},
		// ... it takes effect once the grant is claimed: a re-entry.
		"fresh acquire from another connection after the claim": {h: handedToOne().
			add(lockInput{Op: opAcquire, Owner: 1, Sess: 6, Lease: 10000, Reentrant: true, Call: 31, Ret: 60}, granted(2, 20)).
			add(lockInput{Op: opAcquire, Owner: 1, Sess: 1, Lease: 10000, Reentrant: true, Wait: 50000, Retry: true, Call: 40, Ret: 41}, granted(1, 20))},
		// A renew from another session claims the grant (its claim was
		// answered from a read, recorded later): a re-entry counts 2.
		"renew from another connection claims": {h: handedToOne().
			add(lockInput{Op: opRenew, Owner: 1, Sess: 6, Lease: 10000, Call: 40, Ret: 41}, ok).
			add(lockInput{Op: opAcquire, Owner: 1, Sess: 6, Lease: 10000, Reentrant: true, Call: 50, Ret: 51}, granted(2, 20))},
		"indeterminate acquire may hold": {h: new(histBuilder).
			add(acq(0, 0, 2, 10000), unknown).
			add(acq(1, 10, 11, 1000), held).
			add(rel(1, 12, 13), lockOutput{Out: outNotOwner})},
		"indeterminate acquire may never apply": {h: new(histBuilder).
			add(acq(0, 0, 2, 10000), unknown).
			add(acq(1, 10, 11, 1000), granted(1, 9))},
		"reentrant counts": {h: &histBuilder{ops: reentrant([]lockOutput{granted(1, 5), granted(2, 5), released(1), released(0)})}},
		"blind java client beside a seeing one": {h: new(histBuilder).
			add(acq(0, 0, 2, 1000), blindTrue).
			add(acq(1, 10, 11, 1000), held).
			add(rel(1, 12, 13), blindFalse).
			add(rel(0, 20, 22), blindOK).
			add(acq(1, 30, 32, 1000), granted(1, 9)).
			add(acq(0, 40, 41, 1000), blindHeld).
			add(rel(0, 42, 43), blindFalse)},
	} {
		t.Run(name, func(t *testing.T) {
			if res := check(t, tc.lost, tc.h); res != porcupine.Ok {
				t.Fatalf("legal history judged %s", res)
			}
		})
	}
}

func TestModelRejects(t *testing.T) {
	for name, tc := range map[string]struct {
		lost map[int32]int64
		h    *histBuilder
	}{
		"double grant": {h: new(histBuilder).
			add(acq(0, 0, 2, 1000), granted(1, 5)).
			add(acq(1, 10, 12, 1000), granted(1, 9))},
		"grant before the lease can end": {h: new(histBuilder).
			add(acq(0, 0, 2, 100), granted(1, 5)).
			add(acq(1, 50, 90, 1000), granted(1, 9))},
		"lapsed lease renewed": {h: new(histBuilder).
			add(acq(0, 0, 2, 100), granted(1, 5)).
			add(lockInput{Op: opRenew, Owner: 0, Lease: 1000, Call: 300, Ret: 301}, ok)},
		"lock lost while held": {h: new(histBuilder).
			add(acq(0, 0, 2, 10000), granted(1, 5)).
			add(rel(0, 100, 101), lockOutput{Out: outNotFound})},
		"token goes backwards": {h: new(histBuilder).
			add(acq(0, 0, 2, 1000), granted(1, 9)).
			add(rel(0, 10, 11), released(0)).
			add(acq(1, 20, 21, 1000), granted(1, 5))},
		"waiter barged": {h: new(histBuilder).
			add(acq(0, 0, 2, 1000), granted(1, 5)).
			add(acqWait(1, 10, 11, 1000, 5000), queued(0)).
			add(rel(0, 30, 31), released(0)).
			add(acq(2, 40, 41, 1000), granted(1, 40))},
		"second in queue served first": {h: new(histBuilder).
			add(acq(0, 0, 2, 1000), granted(1, 5)).
			add(acqWait(1, 10, 11, 1000, 5000), queued(0)).
			add(acqWait(2, 20, 21, 1000, 5000), queued(1)).
			add(rel(0, 30, 31), released(0)).
			add(acqWait(2, 40, 41, 1000, 5000), granted(1, 31))},
		"claim with a new token": {h: new(histBuilder).
			add(acq(0, 0, 2, 1000), granted(1, 5)).
			add(acqWait(1, 10, 11, 1000, 5000), queued(0)).
			add(rel(0, 30, 31), released(0)).
			add(lockInput{Op: opNotify, Owner: 1, Call: 10, Ret: 40}, ok).
			add(acqWait(1, 41, 45, 1000, 5000), granted(1, 3))},
		"push to an owner that never waited": {h: new(histBuilder).
			add(acq(0, 0, 2, 1000), granted(1, 5)).
			add(acq(1, 10, 11, 1000), held).
			add(lockInput{Op: opNotify, Owner: 1, Call: 40, Ret: 40}, ok)},
		"cleanup before the connection closed": {lost: map[int32]int64{0: 500}, h: new(histBuilder).
			add(acq(0, 0, 2, 10000), granted(1, 5)).
			add(acq(1, 60, 61, 1000), granted(1, 9))},
		// What the level-2 CLAIM rule did when it applied after such a
		// renew: the first session's cleanup freed the lock, so its owner,
		// renewing from the new one, lost it.
		"cleanup of a connection the lock moved off": {lost: map[int32]int64{1: 60}, h: handedToOne().
			add(lockInput{Op: opAcquire, Owner: 1, Sess: 1, Lease: 10000, Wait: 50000, Retry: true, Call: 31, Ret: 32}, granted(1, 20)).
			add(lockInput{Op: opRenew, Owner: 1, Sess: 6, Lease: 10000, Call: 40, Ret: 41}, ok).
			add(lockInput{Op: opRelease, Owner: 1, Sess: 6, Call: 110, Ret: 111}, lockOutput{Out: outNotFound})},
		"double grant after a move": {lost: map[int32]int64{0: 50}, h: new(histBuilder).
			add(acq(0, 0, 2, 10000), granted(1, 5)).
			add(lockInput{Op: opRenew, Owner: 0, Sess: 5, Lease: 10000, Call: 10, Ret: 11}, ok).
			add(acq(1, 60, 61, 1000), granted(1, 60))},
		// The grant handed to owner 1 on session 1 is unclaimed; its fresh
		// ACQUIRE from session 6 cannot claim it.
		"fresh acquire from another connection claims": {h: handedToOne().
			add(lockInput{Op: opAcquire, Owner: 1, Sess: 6, Lease: 10000, Reentrant: true, Call: 31, Ret: 32}, granted(1, 20))},
		// Owner 1 claimed on session 1; its cancel from session 6 cannot
		// have given the lock up to owner 2.
		"cancel from another connection gives a claimed grant up": {h: new(histBuilder).
			add(acq(0, 0, 2, 10000), granted(1, 5)).
			add(acqWait(1, 10, 11, 10000, 50000), queued(0)).
			add(acqWait(2, 12, 13, 10000, 50000), queued(1)).
			add(rel(0, 20, 21), released(0)).
			add(lockInput{Op: opAcquire, Owner: 1, Sess: 1, Lease: 10000, Wait: 50000, Retry: true, Call: 31, Ret: 32}, granted(1, 20)).
			add(lockInput{Op: opCancel, Owner: 1, Sess: 6, Call: 40, Ret: 41}, ok).
			add(lockInput{Op: opAcquire, Owner: 2, Sess: 2, Lease: 10000, Wait: 50000, Retry: true, Call: 50, Ret: 51}, granted(1, 40))},
		// Not claimed, but its cancel from session 6 cannot give the grant
		// up either: the server waits until the grant is claimed or gone.
		"cancel from another connection gives an unclaimed grant up": {h: new(histBuilder).
			add(acq(0, 0, 2, 10000), granted(1, 5)).
			add(acqWait(1, 10, 11, 10000, 50000), queued(0)).
			add(acqWait(2, 12, 13, 10000, 50000), queued(1)).
			add(rel(0, 20, 21), released(0)).
			add(lockInput{Op: opCancel, Owner: 1, Sess: 6, Call: 40, Ret: 41}, ok).
			add(lockInput{Op: opAcquire, Owner: 2, Sess: 2, Lease: 10000, Wait: 50000, Retry: true, Call: 50, Ret: 51}, granted(1, 20))},
		"reentrant count skips": {h: &histBuilder{ops: reentrant([]lockOutput{granted(1, 5), granted(3, 5)})}},
		"blind double grant": {h: new(histBuilder).
			add(acq(0, 0, 2, 1000), granted(1, 5)).
			add(acq(1, 10, 12, 1000), blindTrue)},
		"blind release of a lock it lost": {h: new(histBuilder).
			add(acq(0, 0, 2, 1000), blindTrue).
			add(acq(1, 10, 12, 1000), held).
			add(rel(1, 20, 21), blindOK)},
		"blind holder refused its own release": {h: new(histBuilder).
			add(acq(0, 0, 2, 10000), blindTrue).
			add(rel(0, 20, 21), blindFalse)},
	} {
		t.Run(name, func(t *testing.T) {
			if res := check(t, tc.lost, tc.h); res != porcupine.Illegal {
				t.Fatalf("illegal history judged %s", res)
			}
		})
	}
}

// reentrant builds acquire, acquire, release, release by one session on a
// REENTRANT lock, with the given replies.
func reentrant(outs []lockOutput) []porcupine.Operation {
	b := new(histBuilder)
	for i, out := range outs {
		in := acq(0, int64(i*10), int64(i*10+1), 1000)
		if out.Out == outOK {
			in = rel(0, int64(i*10), int64(i*10+1))
		}
		in.Reentrant = true
		b.add(in, out)
	}
	return b.ops
}
