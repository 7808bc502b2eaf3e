package statemachine

import (
	"fmt"
	"maps"
	"runtime/debug"
	"slices"
	"testing"
	"unsafe"

	"nacos-lockd/statemachine/lockview"
)

// Commands are built with these helpers; time is explicit everywhere.
func acq(kind Kind, key, owner, conn string, now, lease, wait int64) Command {
	return Command{Op: OpAcquire, Kind: kind, Key: key, Owner: owner, ConnID: conn, NowMs: now, LeaseMs: lease, WaitMs: wait}
}

func rel(kind Kind, key, owner string, now int64) Command {
	return Command{Op: OpRelease, Kind: kind, Key: key, Owner: owner, NowMs: now}
}

func renew(kind Kind, key, owner, conn string, now, lease int64) Command {
	return Command{Op: OpRenew, Kind: kind, Key: key, Owner: owner, ConnID: conn, NowMs: now, LeaseMs: lease}
}

func cancelWait(kind Kind, key, owner, conn string, now int64) Command {
	return Command{Op: OpCancelWait, Kind: kind, Key: key, Owner: owner, ConnID: conn, NowMs: now}
}

func expire(kind Kind, key string, token uint64, now int64) Command {
	return Command{Op: OpExpire, Kind: kind, Key: key, Token: token, NowMs: now}
}

func cleanup(conn string, now int64) Command {
	return Command{Op: OpCleanupConnection, ConnID: conn, NowMs: now}
}

func forceRel(kind Kind, key string, token uint64, now int64) Command {
	return Command{Op: OpForceRelease, Kind: kind, Key: key, Token: token, NowMs: now}
}

const (
	R = KindReentrant
	N = KindNonReentrant
	G = KindNacosLock
)

func ok(count int32, token uint64) Result {
	return Result{Code: CodeOK, Count: count, WaitPosition: -1, Token: token}
}

func queued(pos int32) Result { return Result{Code: CodeHeld, WaitPosition: pos} }

// step is one command applied at index = its position + 1 in the script.
type step struct {
	cmd  Command
	want Result
}

// run applies a script to a fresh table, checks every result and the
// table's internal invariants after each step, and returns the table.
func run(t *testing.T, steps []step) *Table {
	t.Helper()
	tb := NewTable()
	for i, s := range steps {
		got := tb.Apply(uint64(i+1), s.cmd)
		if got != s.want {
			t.Fatalf("step %d (%s %q owner %q): got %+v, want %+v", i+1, s.cmd.Op, s.cmd.Key, s.cmd.Owner, got, s.want)
		}
		checkInvariants(t, tb)
	}
	return tb
}

func TestAcquireRelease(t *testing.T) {
	tests := []struct {
		name  string
		steps []step
		// end describes the lock "k" (kind of the first step) afterwards.
		end lockview.Lock
	}{
		{
			name:  "acquire free lock",
			steps: []step{{acq(N, "k", "a", "c1", 100, 1000, 0), ok(1, 1)}},
			end:   lockview.Lock{Found: true, Owner: "a", ConnID: "c1", Count: 1, LeaseEndMs: 1100, Token: 1, AcquiredAtMs: 100},
		},
		{
			name: "second owner refused without waiting",
			steps: []step{
				{acq(N, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
				{acq(N, "k", "b", "c2", 101, 1000, 0), refused(CodeHeld)},
			},
			end: lockview.Lock{Found: true, Owner: "a", ConnID: "c1", Count: 1, LeaseEndMs: 1100, Token: 1, AcquiredAtMs: 100},
		},
		{
			name: "same key under two types is two locks",
			steps: []step{
				{acq(N, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
				{acq(R, "k", "b", "c2", 101, 1000, 0), ok(1, 2)},
			},
			end: lockview.Lock{Found: true, Owner: "a", ConnID: "c1", Count: 1, LeaseEndMs: 1100, Token: 1, AcquiredAtMs: 100},
		},
		{
			name: "keys are case sensitive",
			steps: []step{
				{acq(N, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
				{acq(N, "K", "b", "c2", 101, 1000, 0), ok(1, 2)},
			},
			end: lockview.Lock{Found: true, Owner: "a", ConnID: "c1", Count: 1, LeaseEndMs: 1100, Token: 1, AcquiredAtMs: 100},
		},
		{
			name: "reentrant counts up and down with the same token",
			steps: []step{
				{acq(R, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
				{acq(R, "k", "a", "c1", 200, 1000, 0), ok(2, 1)},
				{acq(R, "k", "a", "c1", 300, 1000, 0), ok(3, 1)},
				{rel(R, "k", "a", 400), ok(2, 0)},
				{rel(R, "k", "a", 500), ok(1, 0)},
			},
			end: lockview.Lock{Found: true, Owner: "a", ConnID: "c1", Count: 1, LeaseEndMs: 1300, Token: 1, AcquiredAtMs: 100},
		},
		{
			name: "final release frees and deletes the entry",
			steps: []step{
				{acq(R, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
				{acq(R, "k", "a", "c1", 200, 1000, 0), ok(2, 1)},
				{rel(R, "k", "a", 300), ok(1, 0)},
				{rel(R, "k", "a", 400), ok(0, 0)},
				{rel(R, "k", "a", 500), refused(CodeNotFound)},
			},
		},
		{
			name: "reentry rebinds the connection and extends the lease",
			steps: []step{
				{acq(R, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
				{acq(R, "k", "a", "c2", 900, 5000, 0), ok(2, 1)},
			},
			end: lockview.Lock{Found: true, Owner: "a", ConnID: "c2", Count: 2, LeaseEndMs: 5900, Token: 1, AcquiredAtMs: 100},
		},
		{
			name: "non-reentrant refuses its own holder and never queues it",
			steps: []step{
				{acq(N, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
				{acq(N, "k", "a", "c1", 101, 1000, 5000), refused(CodeHeld)},
			},
			end: lockview.Lock{Found: true, Owner: "a", ConnID: "c1", Count: 1, LeaseEndMs: 1100, Token: 1, AcquiredAtMs: 100},
		},
		{
			name: "nacos lock refuses re-entry",
			steps: []step{
				{acq(G, "k", "c1", "c1", 100, 1000, 0), ok(1, 1)},
				{acq(G, "k", "c1", "c1", 101, 1000, 0), refused(CodeHeld)},
			},
			end: lockview.Lock{Found: true, Owner: "c1", ConnID: "c1", Count: 1, LeaseEndMs: 1100, Token: 1, AcquiredAtMs: 100},
		},
		{
			name: "release by another owner is refused",
			steps: []step{
				{acq(G, "k", "c1", "c1", 100, 1000, 0), ok(1, 1)},
				{rel(G, "k", "c2", 101), refused(CodeNotOwner)},
			},
			end: lockview.Lock{Found: true, Owner: "c1", ConnID: "c1", Count: 1, LeaseEndMs: 1100, Token: 1, AcquiredAtMs: 100},
		},
		{
			name:  "release of a lock that does not exist",
			steps: []step{{rel(N, "k", "a", 100), refused(CodeNotFound)}},
		},
		{
			name: "release after the lease ended is refused and frees the lock",
			steps: []step{
				{acq(N, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
				{rel(N, "k", "a", 1101), refused(CodeNotFound)},
			},
		},
		{
			name: "expiry is strict: at the lease end the lock is still held",
			steps: []step{
				{acq(N, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
				{acq(N, "k", "b", "c2", 1100, 1000, 0), refused(CodeHeld)},
				{acq(N, "k", "b", "c2", 1101, 1000, 0), ok(1, 3)},
			},
			end: lockview.Lock{Found: true, Owner: "b", ConnID: "c2", Count: 1, LeaseEndMs: 2101, Token: 3, AcquiredAtMs: 1101},
		},
		{
			name: "a command stamped in the past does not move the clock back",
			steps: []step{
				{acq(N, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
				{acq(N, "x", "z", "c9", 5000, 1000, 0), ok(1, 2)},
				// Stamped before the lease end, but the table clock is 5000.
				{acq(N, "k", "b", "c2", 200, 1000, 0), ok(1, 3)},
			},
			end: lockview.Lock{Found: true, Owner: "b", ConnID: "c2", Count: 1, LeaseEndMs: 6000, Token: 3, AcquiredAtMs: 5000},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tb := run(t, tt.steps)
			first := tt.steps[0].cmd
			tt.end.Type, tt.end.Key = first.Kind.String(), "k"
			got := tb.Lock(first.Kind, "k")
			tt.end.Clock = tb.Clock() // the read's clock, not the lock's state
			if fmt.Sprint(got) != fmt.Sprint(tt.end) {
				t.Fatalf("end state:\n got %+v\nwant %+v", got, tt.end)
			}
		})
	}
}

func TestRenew(t *testing.T) {
	t.Run("extends the lease and moves the lock to the renewing connection", func(t *testing.T) {
		tb := run(t, []step{
			{acq(R, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
			{renew(R, "k", "a", "c2", 1000, 1000), ok(1, 1)},
			{acq(R, "k", "b", "c3", 1500, 1000, 0), refused(CodeHeld)},
			{cleanup("c1", 1600), ok(0, 0)}, // the old connection no longer holds it
			{acq(R, "k", "b", "c3", 1700, 1000, 0), refused(CodeHeld)},
		})
		if l := tb.Lock(R, "k"); l.ConnID != "c2" || l.LeaseEndMs != 2000 {
			t.Fatalf("lock after renew: %+v", l)
		}
	})
	t.Run("by another owner is refused", func(t *testing.T) {
		run(t, []step{
			{acq(R, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
			{renew(R, "k", "b", "c2", 200, 1000), refused(CodeNotOwner)},
		})
	})
	t.Run("of a missing lock is refused and creates nothing", func(t *testing.T) {
		tb := run(t, []step{{renew(R, "k", "a", "c1", 100, 1000), refused(CodeNotFound)}})
		if tb.Stats().Locks != 0 {
			t.Fatalf("renew created an entry: %+v", tb.Stats())
		}
	})
	t.Run("after the lease ended does not resurrect it", func(t *testing.T) {
		tb := run(t, []step{
			{acq(R, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
			{renew(R, "k", "a", "c1", 1101, 1000), refused(CodeNotFound)},
		})
		if tb.Lock(R, "k").Found {
			t.Fatal("lapsed lock still present after renew")
		}
	})
}

func TestExpire(t *testing.T) {
	t.Run("ends the lease it names once the clock is past it", func(t *testing.T) {
		tb := run(t, []step{
			{acq(N, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
			{expire(N, "k", 1, 1100), refused(CodeNotExpired)},
			{expire(N, "k", 1, 1101), ok(0, 0)},
		})
		if tb.Lock(N, "k").Found {
			t.Fatal("expired lock still present")
		}
	})
	t.Run("a renew committed first wins", func(t *testing.T) {
		run(t, []step{
			{acq(N, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
			{renew(N, "k", "a", "c1", 1000, 1000), ok(1, 1)},
			{expire(N, "k", 1, 1500), refused(CodeNotExpired)},
		})
	})
	t.Run("a stale token never ends a newer grant", func(t *testing.T) {
		tb := run(t, []step{
			{acq(N, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
			{rel(N, "k", "a", 200), ok(0, 0)},
			{acq(N, "k", "b", "c2", 300, 1000, 0), ok(1, 3)},
			{expire(N, "k", 1, 1200), refused(CodeNotExpired)},
		})
		if l := tb.Lock(N, "k"); l.Owner != "b" {
			t.Fatalf("stale EXPIRE changed the holder: %+v", l)
		}
	})
	t.Run("of a missing lock creates nothing", func(t *testing.T) {
		tb := run(t, []step{{expire(N, "k", 1, 100), refused(CodeNotExpired)}})
		if tb.Stats().Locks != 0 {
			t.Fatal("EXPIRE created an entry")
		}
	})
}

func TestWaitQueue(t *testing.T) {
	t.Run("FIFO hand-off with push, claim and fencing tokens", func(t *testing.T) {
		tb := run(t, []step{
			{acq(R, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
			{acq(R, "k", "b", "c2", 110, 2000, 5000), queued(0)},
			{acq(R, "k", "c", "c3", 120, 3000, 5000), queued(1)},
			{acq(R, "k", "b", "c2", 130, 2000, 5000), queued(0)}, // a retry keeps its place
			{rel(R, "k", "a", 200), ok(0, 0)},                    // index 5 hands the lock to b
		})
		if n := tb.TakeNotifications(); !slices.Equal(n, []Notification{{ConnID: "c2", Owner: "b", Kind: R, Key: "k", Token: 5}}) {
			t.Fatalf("notifications: %+v", n)
		}
		l := tb.Lock(R, "k")
		if l.Owner != "b" || !l.Unclaimed || l.Token != 5 || l.LeaseEndMs != 2200 || len(l.Waiters) != 1 {
			t.Fatalf("after hand-off: %+v", l)
		}
		// Nobody barges while b's grant is unclaimed.
		if got := tb.Apply(6, acq(R, "k", "d", "c4", 210, 1000, 0)); got != refused(CodeHeld) {
			t.Fatalf("barging acquire: %+v", got)
		}
		// b claims: count 1, not 2, and the hand-off's token.
		if got := tb.Apply(7, Command{Op: OpAcquire, Kind: R, Key: "k", Owner: "b", ConnID: "c2", NowMs: 300, LeaseMs: 2000, WaitMs: 5000, Retry: true}); got != ok(1, 5) {
			t.Fatalf("claim: %+v", got)
		}
		if got := tb.Apply(8, acq(R, "k", "b", "c2", 310, 2000, 0)); got != ok(2, 5) {
			t.Fatalf("re-entry after claim: %+v", got)
		}
		tb.Apply(9, rel(R, "k", "b", 320))
		if got := tb.Apply(10, rel(R, "k", "b", 330)); got != ok(0, 0) {
			t.Fatalf("final release: %+v", got)
		}
		if n := tb.TakeNotifications(); len(n) != 1 || n[0].Owner != "c" || n[0].Token != 10 {
			t.Fatalf("second hand-off notifications: %+v", n)
		}
		checkInvariants(t, tb)
	})
	t.Run("a waiter whose deadline passed is skipped", func(t *testing.T) {
		tb := run(t, []step{
			{acq(N, "k", "a", "c1", 100, 10000, 0), ok(1, 1)},
			{acq(N, "k", "b", "c2", 110, 1000, 500), queued(0)},
			{acq(N, "k", "c", "c3", 120, 1000, 5000), queued(1)},
			{rel(N, "k", "a", 610), ok(0, 0)},
		})
		if l := tb.Lock(N, "k"); l.Owner != "c" || len(l.Waiters) != 0 {
			t.Fatalf("after hand-off: %+v", l)
		}
	})
	t.Run("with every waiter dead the lock is freed", func(t *testing.T) {
		tb := run(t, []step{
			{acq(N, "k", "a", "c1", 100, 10000, 0), ok(1, 1)},
			{acq(N, "k", "b", "c2", 110, 1000, 500), queued(0)},
			{rel(N, "k", "a", 610), ok(0, 0)},
		})
		if tb.Lock(N, "k").Found || len(tb.TakeNotifications()) != 0 {
			t.Fatal("lock handed to a dead waiter")
		}
	})
	t.Run("expiry of the holder hands over to the head", func(t *testing.T) {
		tb := run(t, []step{
			{acq(N, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
			{acq(N, "k", "b", "c2", 110, 1000, 5000), queued(0)},
			{expire(N, "k", 1, 1101), ok(0, 0)},
		})
		if l := tb.Lock(N, "k"); l.Owner != "b" || l.Token != 3 {
			t.Fatalf("after expiry: %+v", l)
		}
	})
	t.Run("an unclaimed grant that is never claimed expires to the next waiter", func(t *testing.T) {
		tb := run(t, []step{
			{acq(N, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
			{acq(N, "k", "b", "c2", 110, 1000, 60000), queued(0)},
			{acq(N, "k", "c", "c3", 120, 1000, 60000), queued(1)},
			{rel(N, "k", "a", 200), ok(0, 0)},   // index 4: b granted until 1200
			{expire(N, "k", 4, 1201), ok(0, 0)}, // index 5: c granted
		})
		if l := tb.Lock(N, "k"); l.Owner != "c" || l.Token != 5 || !l.Unclaimed {
			t.Fatalf("after unclaimed expiry: %+v", l)
		}
	})
	t.Run("cancel of an unclaimed grant passes it on", func(t *testing.T) {
		tb := run(t, []step{
			{acq(N, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
			{acq(N, "k", "b", "c2", 110, 1000, 5000), queued(0)},
			{acq(N, "k", "c", "c3", 120, 1000, 5000), queued(1)},
			{rel(N, "k", "a", 200), ok(0, 0)},
			{cancelWait(N, "k", "b", "c2", 210), ok(0, 0)},
		})
		if l := tb.Lock(N, "k"); l.Owner != "c" || l.Token != 5 {
			t.Fatalf("after cancel: %+v", l)
		}
		if n := tb.TakeNotifications(); len(n) != 2 || n[1].Owner != "c" {
			t.Fatalf("notifications: %+v", n)
		}
	})
	t.Run("cancel removes a waiter and leaves a claimed lock alone", func(t *testing.T) {
		tb := run(t, []step{
			{acq(N, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
			{acq(N, "k", "b", "c2", 110, 1000, 5000), queued(0)},
			{cancelWait(N, "k", "b", "c2", 120), ok(0, 0)},
			{cancelWait(N, "k", "a", "c1", 130), ok(0, 0)},
			{cancelWait(N, "zz", "a", "c1", 130), ok(0, 0)},
		})
		if l := tb.Lock(N, "k"); l.Owner != "a" || len(l.Waiters) != 0 {
			t.Fatalf("after cancel: %+v", l)
		}
		if tb.Lock(N, "zz").Found {
			t.Fatal("cancel created an entry")
		}
	})
	t.Run("the reentrant holder re-enters past queued waiters", func(t *testing.T) {
		run(t, []step{
			{acq(R, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
			{acq(R, "k", "b", "c2", 110, 1000, 5000), queued(0)},
			{acq(R, "k", "a", "c1", 120, 1000, 0), ok(2, 1)},
		})
	})
	t.Run("a retry from a waiter no longer queued is queued again at the tail", func(t *testing.T) {
		run(t, []step{
			{acq(N, "k", "a", "c1", 100, 100000, 0), ok(1, 1)},
			{acq(N, "k", "b", "c2", 110, 1000, 100), queued(0)},
			{acq(N, "k", "c", "c3", 120, 1000, 50000), queued(1)},
			// b's deadline passed at 210; its retry queues it behind c.
			{Command{Op: OpAcquire, Kind: N, Key: "k", Owner: "b", ConnID: "c2", NowMs: 300, LeaseMs: 1000, WaitMs: 5000, Retry: true}, queued(1)},
		})
	})
	t.Run("an acquire that may not wait is refused while waiters queue", func(t *testing.T) {
		run(t, []step{
			{acq(N, "k", "a", "c1", 100, 1000, 0), ok(1, 1)},
			{acq(N, "k", "b", "c2", 110, 1000, 5000), queued(0)},
			{acq(N, "k", "c", "c3", 120, 1000, -1), refused(CodeHeld)},
		})
	})
}

func TestCleanupConnection(t *testing.T) {
	tb := run(t, []step{
		{acq(R, "k1", "a", "c1", 100, 10000, 0), ok(1, 1)},
		{acq(R, "k1", "a", "c1", 101, 10000, 0), ok(2, 1)},
		{acq(N, "k2", "a2", "c1", 102, 10000, 0), ok(1, 3)},
		{acq(N, "k3", "z", "c9", 103, 10000, 0), ok(1, 4)},
		{acq(N, "k3", "a3", "c1", 104, 10000, 5000), queued(0)},
		{acq(R, "k1", "b", "c2", 105, 10000, 5000), queued(0)},
		{acq(R, "k1", "a4", "c1", 106, 10000, 5000), queued(1)},
		{cleanup("c1", 200), ok(0, 0)},
	})
	// k1 went to b despite a's count of 2; a4's wait was dropped.
	if l := tb.Lock(R, "k1"); l.Owner != "b" || l.ConnID != "c2" || l.Token != 8 || len(l.Waiters) != 0 {
		t.Fatalf("k1: %+v", l)
	}
	if tb.Lock(N, "k2").Found {
		t.Fatal("k2 still held after its connection closed")
	}
	if l := tb.Lock(N, "k3"); l.Owner != "z" || len(l.Waiters) != 0 {
		t.Fatalf("k3: %+v", l)
	}
	if n := tb.TakeNotifications(); len(n) != 1 || n[0].Owner != "b" {
		t.Fatalf("notifications: %+v", n)
	}
	if _, ok := tb.conns["c1"]; ok {
		t.Fatal("connection index still references c1")
	}
}

func TestMalformedCommandsChangeNothing(t *testing.T) {
	tb := NewTable()
	tb.Apply(1, acq(R, "k", "a", "c1", 100, 1000, 0))
	before := tb.StateBytes()
	bad := []Command{
		{Op: 0, Kind: R, Key: "k", Owner: "a", ConnID: "c1", NowMs: 5000, LeaseMs: 1},
		{Op: 99, Kind: R, Key: "k", Owner: "a", ConnID: "c1", NowMs: 5000},
		{Op: OpAcquire, Kind: 0, Key: "k", Owner: "a", ConnID: "c1", NowMs: 5000, LeaseMs: 1},
		{Op: OpAcquire, Kind: R, Key: "", Owner: "a", ConnID: "c1", NowMs: 5000, LeaseMs: 1},
		{Op: OpAcquire, Kind: R, Key: "k", Owner: "", ConnID: "c1", NowMs: 5000, LeaseMs: 1},
		{Op: OpAcquire, Kind: R, Key: "k", Owner: "b", ConnID: "c1", NowMs: 5000, LeaseMs: 0},
		{Op: OpRelease, Kind: R, Key: "k", Owner: "", NowMs: 5000},
		{Op: OpRenew, Kind: R, Key: "k", Owner: "a", ConnID: "c1", NowMs: 5000, LeaseMs: -5},
		{Op: OpCleanupConnection, NowMs: 5000},
	}
	for i, c := range bad {
		if got := tb.Apply(1, c); got.Code != CodeMalformed {
			t.Errorf("command %d %+v: got %+v, want malformed", i, c, got)
		}
	}
	if got := tb.ApplyEncoded(1, []byte{0xff, 0x01}); got.Code != CodeMalformed {
		t.Errorf("garbage entry: %+v", got)
	}
	if string(tb.StateBytes()) != string(before) {
		t.Fatal("a malformed command changed the table")
	}
}

func TestHugeLeaseDoesNotOverflow(t *testing.T) {
	tb := run(t, []step{{acq(N, "k", "a", "c1", 1<<62, 1<<62, 1<<62), ok(1, 1)}})
	if l := tb.Lock(N, "k"); l.LeaseEndMs != maxTime {
		t.Fatalf("lease end %d", l.LeaseEndMs)
	}
}

func TestExpiredLists(t *testing.T) {
	tb := run(t, []step{
		{acq(N, "a", "o", "c1", 100, 1000, 0), ok(1, 1)},
		{acq(N, "b", "o", "c1", 100, 500, 0), ok(1, 2)},
		{acq(N, "c", "o", "c1", 100, 5000, 0), ok(1, 3)},
	})
	got := tb.Expired(1101, 10)
	want := []ExpiredLease{{N, "b", 2, 600}, {N, "a", 1, 1100}}
	if !slices.Equal(got, want) {
		t.Fatalf("expired: %+v, want %+v", got, want)
	}
	if got := tb.Expired(1101, 1); len(got) != 1 || got[0].Key != "b" {
		t.Fatalf("limit: %+v", got)
	}
	if got := tb.Expired(600, 10); len(got) != 0 {
		t.Fatalf("strictness: %+v", got)
	}
}

// checkInvariants recomputes the derived indexes from scratch and checks
// the rules every apply must keep.
// describe prints a lock's fields and its waiters (not the queue's
// address), for comparing and for failure messages.
func describe(l *lockState) string {
	c := *l
	c.waitq = nil
	return fmt.Sprintf("%+v waiters %+v", c, l.queue())
}

// get returns the lock with id, or nil.
func (t *Table) get(id lockID) *lockState {
	l, _ := t.lookup(id)
	return l
}

// lockMap returns the table's locks by id.
func (t *Table) lockMap() map[lockID]*lockState {
	m := make(map[lockID]*lockState, t.locks.Len())
	t.locks.Ascend(func(l *lockState) bool {
		m[l.id()] = l
		return true
	})
	return m
}

func checkInvariants(tb testing.TB, t *Table) {
	tb.Helper()
	held, queued := 0, 0
	conns := map[string]map[*lockState]int32{}
	ref := func(c string, l *lockState) {
		if conns[c] == nil {
			conns[c] = map[*lockState]int32{}
		}
		conns[c][l]++
	}
	for id, l := range t.lockMap() {
		if !l.held() && len(l.queue()) == 0 {
			tb.Fatalf("%v: free lock with no waiters kept", id)
		}
		if !l.held() && len(l.queue()) > 0 {
			tb.Fatalf("%v: free lock with waiters (nobody was handed it)", id)
		}
		if l.held() {
			held++
			ref(l.connID, l)
			if l.count < 1 || l.token == 0 || l.token > t.fence {
				tb.Fatalf("%v: bad holder %+v (fence %d)", id, l, t.fence)
			}
			if got, ok := t.leases.Get(l); !ok || got != l {
				tb.Fatalf("%v: lease not indexed", id)
			}
		}
		owners := map[string]bool{}
		for _, w := range l.queue() {
			queued++
			ref(w.connID, l)
			if owners[w.owner] || w.owner == l.owner {
				tb.Fatalf("%v: owner %q queued twice or queued behind itself", id, w.owner)
			}
			owners[w.owner] = true
		}
	}
	var prev *lockState
	t.locks.Ascend(func(l *lockState) bool {
		if prev != nil && compareIDs(prev.id(), l.id()) >= 0 {
			tb.Fatalf("locks out of order: %v before %v", prev.id(), l.id())
		}
		if got, ok := t.lookup(l.id()); !ok || got != l {
			tb.Fatalf("%v: a lookup does not find it", l.id())
		}
		prev = l
		return true
	})
	if held != t.held || queued != t.queued || held != t.leases.Len() {
		tb.Fatalf("counters: held %d/%d leases %d, queued %d/%d", held, t.held, t.leases.Len(), queued, t.queued)
	}
	if len(conns) != len(t.conns) {
		tb.Fatalf("connection index: %d connections, want %d", len(t.conns), len(conns))
	}
	for c, want := range conns {
		if !maps.Equal(t.conns[c], want) {
			tb.Fatalf("connection index of %s: %d locks, want %d (or multiplicities differ)", c, len(t.conns[c]), len(want))
		}
	}
}

func TestLimitsCarriedInCommands(t *testing.T) {
	withLimits := func(c Command, waiters uint32, locks uint64) Command {
		c.MaxWaiters, c.MaxLocks = waiters, locks
		return c
	}
	tb := run(t, []step{
		{withLimits(acq(N, "a", "o1", "c1", 100, 60000, 0), 2, 2), ok(1, 1)},
		{withLimits(acq(N, "b", "o1", "c1", 100, 60000, 0), 2, 2), ok(1, 2)},
		// A third lock entry is refused; existing ones keep working.
		{withLimits(acq(N, "c", "o1", "c1", 100, 60000, 0), 2, 2), refused(CodeTooManyLocks)},
		{withLimits(acq(N, "a", "o2", "c2", 100, 60000, 5000), 2, 2), queued(0)},
		{withLimits(acq(N, "a", "o3", "c3", 100, 60000, 5000), 2, 2), queued(1)},
		// The queue is full for newcomers, not for those already in it.
		{withLimits(acq(N, "a", "o4", "c4", 100, 60000, 5000), 2, 2), refused(CodeTooManyWaiters)},
		{withLimits(acq(N, "a", "o3", "c3", 110, 60000, 5000), 2, 2), queued(1)},
		// Without limits (version 1 commands) nothing is refused.
		{acq(N, "c", "o1", "c1", 100, 60000, 0), ok(1, 8)},
	})
	if tb.Stats().Locks != 3 {
		t.Fatalf("%+v", tb.Stats())
	}
}

func TestCommandEncodingVersions(t *testing.T) {
	plain := acq(N, "k", "o", "c", 100, 1000, 0)
	if b := plain.Encode(); b[0] != commandVersion {
		t.Fatalf("a command without limits encodes as version %d", b[0])
	}
	limited := plain
	limited.MaxWaiters, limited.MaxLocks = 7, 1<<40
	b := limited.Encode()
	if b[0] != commandVersionV2 {
		t.Fatalf("version %d", b[0])
	}
	back, err := DecodeCommand(b)
	if err != nil || back != limited {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	claim := claimCmd(N, "k", "o", "c", 100, 1000, 3)
	claim.Retry, claim.LeaseAtNow = true, true
	if back, err := DecodeCommand(claim.Encode()); err != nil || back != claim {
		t.Fatalf("round trip of a CLAIM with LeaseAtNow: %+v %v", back, err)
	}
	// A bit no build knows is refused: that is what keeps an older build
	// from applying LeaseAtNow as if it were not there.
	unknown := claim.Encode()
	unknown[len(unknown)-2] |= 4 // the flags byte, before the token
	if _, err := DecodeCommand(unknown); err == nil {
		t.Fatal("an unknown flag bit accepted")
	}
	// LeaseAtNow means something only on a CLAIM.
	odd := plain
	odd.LeaseAtNow = true
	if r := NewTable().Apply(1, odd); r.Code != CodeMalformed {
		t.Fatalf("ACQUIRE with LeaseAtNow: %+v, want malformed", r)
	}
	// Version 2 with zero limits is never written, so it is refused.
	bad := append([]byte{commandVersionV2}, plain.Encode()[1:]...)
	bad = append(bad, 0, 0)
	if _, err := DecodeCommand(bad); err == nil {
		t.Fatal("version 2 without limits accepted")
	}
}

// A client's owner and connection id are stored once however many locks
// it holds or waits for, whether the lock was applied or loaded from disk.
func TestOwnersAndConnectionsAreShared(t *testing.T) {
	// unique forgets a copy at a GC once no handle refers to it, and the
	// table keeps the strings, not handles: sharing holds within a GC cycle.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	fresh := func(s string) string { return string([]byte(s)) } // a copy with its own bytes
	tb := NewTable()
	for i, key := range []string{"a", "b", "c"} {
		if r := tb.Apply(uint64(i+1), acq(N, key, fresh("owner-1"), fresh("conn-1"), 1000, 60000, 0)); !r.Success() {
			t.Fatalf("acquire %s: %+v", key, r)
		}
	}
	tb.Apply(4, acq(N, "a", fresh("owner-2"), fresh("conn-1"), 1000, 60000, 60000)) // queued
	tb.Apply(5, renew(N, "b", fresh("owner-1"), fresh("conn-1"), 1000, 60000))
	same := func(what string, ss ...string) {
		t.Helper()
		for _, s := range ss[1:] {
			if unsafe.StringData(s) != unsafe.StringData(ss[0]) {
				t.Fatalf("%s stored more than once", what)
			}
		}
	}
	a, b, c := tb.get(lockID{N, "a"}), tb.get(lockID{N, "b"}), tb.get(lockID{N, "c"})
	same("owner", a.owner, b.owner, c.owner)
	same("connection", a.connID, b.connID, c.connID, a.queue()[0].connID)

	ns := names{} // one load
	la, err := decodeRecord(encodeRecord(a), ns)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := decodeRecord(encodeRecord(b), ns)
	if err != nil {
		t.Fatal(err)
	}
	same("loaded owner", la.owner, lb.owner)
	same("loaded connection", la.connID, lb.connID, la.queue()[0].connID)
}
