package replica

// Copies of statemachine's test helpers that the replica's tests use.

import (
	"math/rand/v2"

	"nacos-lockd/statemachine"
)

const (
	R = statemachine.KindReentrant
	N = statemachine.KindNonReentrant
	G = statemachine.KindNacosLock
)

func refused(code statemachine.Code) statemachine.Result {
	return statemachine.Result{Code: code, WaitPosition: -1}
}

// Commands are built with these helpers; time is explicit everywhere.
func acq(kind statemachine.Kind, key, owner, conn string, now, lease, wait int64) statemachine.Command {
	return statemachine.Command{Op: statemachine.OpAcquire, Kind: kind, Key: key, Owner: owner, ConnID: conn, NowMs: now, LeaseMs: lease, WaitMs: wait}
}

func rel(kind statemachine.Kind, key, owner string, now int64) statemachine.Command {
	return statemachine.Command{Op: statemachine.OpRelease, Kind: kind, Key: key, Owner: owner, NowMs: now}
}

func renew(kind statemachine.Kind, key, owner, conn string, now, lease int64) statemachine.Command {
	return statemachine.Command{Op: statemachine.OpRenew, Kind: kind, Key: key, Owner: owner, ConnID: conn, NowMs: now, LeaseMs: lease}
}

func cancelWait(kind statemachine.Kind, key, owner, conn string, now int64) statemachine.Command {
	return statemachine.Command{Op: statemachine.OpCancelWait, Kind: kind, Key: key, Owner: owner, ConnID: conn, NowMs: now}
}

func ok(count int32, token uint64) statemachine.Result {
	return statemachine.Result{Code: statemachine.CodeOK, Count: count, WaitPosition: -1, Token: token}
}

func queued(pos int32) statemachine.Result {
	return statemachine.Result{Code: statemachine.CodeHeld, WaitPosition: pos}
}

func claimCmd(kind statemachine.Kind, key, owner, conn string, now, lease int64, token uint64) statemachine.Command {
	return statemachine.Command{Op: statemachine.OpClaim, NowMs: now, Kind: kind, Key: key, Owner: owner, ConnID: conn, LeaseMs: lease, Token: token}
}

// goldenImport is what the format-2 golden starts from before the script:
// an import, so its token base is not zero.
func goldenImport() []statemachine.ImportedLock {
	return []statemachine.ImportedLock{
		{Kind: R, Key: "imported-r", Owner: "nacos-owner", ConnID: "nacos-conn", Count: 2, LeaseEndMs: 700000,
			Waiters: []statemachine.ImportedWaiter{{Owner: "w1", ConnID: "nacos-conn-2", EnqueuedMs: 800, DeadlineMs: 900000, LeaseMs: 30000}}},
		{Kind: N, Key: "imported-expired", Owner: "o", ConnID: "c0", Count: 1, LeaseEndMs: 500,
			Waiters: []statemachine.ImportedWaiter{{Owner: "w2", ConnID: "c2", EnqueuedMs: 700, DeadlineMs: 800000, LeaseMs: 10000}}},
		{Kind: G, Key: "imported-legacy", Owner: "legacy-migrated", Count: 1, LeaseEndMs: 600000},
	}
}

// randomCommands produces a reproducible stream over a few keys, owners
// and connections, with clocks that mostly advance and sometimes lag, so
// leases, deadlines, hand-offs, cleanups and force releases all happen.
func randomCommands(seed uint64, n int) []statemachine.Command {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	keys := []string{"a", "b", "c"}
	owners := []string{"o1", "o2", "o3", "o4", "o5"}
	conns := []string{"c1", "c2", "c3"}
	kinds := []statemachine.Kind{statemachine.KindNacosLock, statemachine.KindReentrant, statemachine.KindNonReentrant}
	now := int64(1_000)
	out := make([]statemachine.Command, 0, n)
	for range n {
		now += r.Int64N(300)
		stamp := now - r.Int64N(200) // proposers' clocks disagree a little
		c := statemachine.Command{
			NowMs:  stamp,
			Kind:   kinds[r.IntN(len(kinds))],
			Key:    keys[r.IntN(len(keys))],
			Owner:  owners[r.IntN(len(owners))],
			ConnID: conns[r.IntN(len(conns))],
		}
		switch p := r.IntN(100); {
		case p < 40:
			c.Op, c.LeaseMs = statemachine.OpAcquire, 200+r.Int64N(2000)
			if r.IntN(2) == 0 {
				c.WaitMs = r.Int64N(3000)
			}
			if r.IntN(3) == 0 { // the gateway's limits (command version 2)
				c.MaxWaiters, c.MaxLocks = uint32(1+r.IntN(3)), uint64(2+r.IntN(3))
			}
		case p < 65:
			c.Op = statemachine.OpRelease
		case p < 75:
			c.Op, c.LeaseMs = statemachine.OpRenew, 200+r.Int64N(2000)
		case p < 85:
			c.Op = statemachine.OpCancelWait
		case p < 93:
			c.Op, c.Token = statemachine.OpExpire, uint64(r.IntN(len(out)+1))
		case p < 97:
			c.Op = statemachine.OpCleanupConnection
		default:
			c.Op = statemachine.OpForceRelease // half of them name a grant, most likely a stale one
			if r.IntN(2) == 0 {
				c.Token = uint64(r.IntN(len(out) + 1))
			}
		}
		out = append(out, c)
	}
	return out
}
