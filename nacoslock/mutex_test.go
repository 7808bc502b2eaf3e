package nacoslock_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"nacos-lockd/nacoslock"
)

// TestMutualExclusionSharedCounter: clients on separate connections and
// goroutines increment a counter with a read, a pause and a write (so
// two holders at once lose an update), each under its own Mutex on one
// key. The count must come out exact, and the fencing tokens seen inside
// the critical section must rise strictly.
func TestMutualExclusionSharedCounter(t *testing.T) {
	k := key(t)
	const clients, perClient, rounds = 3, 2, 8
	var counter, inside atomic.Int64
	var lastToken atomic.Uint64
	var overlap, tokenDrops atomic.Int64
	var wg sync.WaitGroup
	ctx := ctxFor(t, 60*time.Second)
	for range clients {
		cl := dial(t, []string{sharedServer})
		for range perClient {
			m := cl.Mutex(k, nacoslock.WithLease(5*time.Second))
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range rounds {
					if err := m.Lock(ctx); err != nil {
						t.Errorf("lock: %v", err)
						return
					}
					if inside.Add(1) != 1 {
						overlap.Add(1)
					}
					if tok := m.FencingToken(); tok <= lastToken.Load() {
						tokenDrops.Add(1)
					} else {
						lastToken.Store(tok)
					}
					v := counter.Load()
					time.Sleep(time.Millisecond)
					counter.Store(v + 1)
					inside.Add(-1)
					if err := m.Unlock(ctx); err != nil {
						t.Errorf("unlock: %v", err)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	if got, want := counter.Load(), int64(clients*perClient*rounds); got != want {
		t.Errorf("counter = %d, want %d: updates were lost to a second holder", got, want)
	}
	if n := overlap.Load(); n != 0 {
		t.Errorf("%d entries into the critical section while another holder was in it", n)
	}
	if n := tokenDrops.Load(); n != 0 {
		t.Errorf("%d grants had a fencing token not above the previous grant's", n)
	}
}

// TestFIFOOrder: waiters queued one after another get the lock in that
// order when the holder lets go.
func TestFIFOOrder(t *testing.T) {
	k := key(t)
	ctx := ctxFor(t, 60*time.Second)
	cl := dial(t, []string{sharedServer})
	holder := cl.Mutex(k)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	first := holder.FencingToken()
	const n = 4
	var mu sync.Mutex
	var order []int
	var tokens []uint64
	var wg sync.WaitGroup
	for i := range n {
		// Each waiter on its own connection, as separate processes would be.
		m := dial(t, []string{sharedServer}).Mutex(k)
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := m.Lock(ctx); err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			tokens = append(tokens, m.FencingToken())
			mu.Unlock()
			if err := m.Unlock(ctx); err != nil {
				t.Errorf("waiter %d unlock: %v", i, err)
			}
		}()
		v := waitQueued(t, sharedServer, nacoslock.NonReentrant, k, i+1)
		if v.Waiters[i].Owner != m.Owner() {
			t.Fatalf("waiter %d queued as %q, want %q", i, v.Waiters[i].Owner, m.Owner())
		}
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, w := range order {
		if w != i {
			t.Fatalf("grant order %v, want 0..%d", order, n-1)
		}
	}
	prev := first
	for _, tok := range tokens {
		if tok <= prev {
			t.Fatalf("tokens %v after %d do not rise", tokens, first)
		}
		prev = tok
	}
}

// TestLockCancelWhileQueued: a Lock whose ctx ends while it waits returns
// the ctx's error and leaves the queue, so the lock is not handed to it
// later: after the holder unlocks, the lock is free.
func TestLockCancelWhileQueued(t *testing.T) {
	k := key(t)
	ctx := ctxFor(t, 30*time.Second)
	holder := dial(t, []string{sharedServer}).Mutex(k)
	if err := holder.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	w := dial(t, []string{sharedServer})

	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if err := w.Mutex(k).Lock(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("lock with a deadline while held: %v, want DeadlineExceeded", err)
	}
	if v, _ := adminLock(t, sharedServer, nacoslock.NonReentrant, k); len(v.Waiters) != 0 {
		t.Fatalf("waiters after the deadline: %+v", v.Waiters)
	}

	cctx, cancelWait := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() { got <- w.Mutex(k).Lock(cctx) }()
	waitQueued(t, sharedServer, nacoslock.NonReentrant, k, 1)
	cancelWait()
	if err := <-got; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled lock: %v, want Canceled", err)
	}
	if v, _ := adminLock(t, sharedServer, nacoslock.NonReentrant, k); len(v.Waiters) != 0 {
		t.Fatalf("waiters after cancel: %+v", v.Waiters)
	}
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if v, held := adminLock(t, sharedServer, nacoslock.NonReentrant, k); held {
		t.Fatalf("lock handed to a cancelled waiter: %+v", v)
	}
	if err := w.Mutex(k).TryLock(ctx); err != nil {
		t.Fatalf("try lock after the holder left: %v", err)
	}
}

func TestTryLock(t *testing.T) {
	k := key(t)
	ctx := ctxFor(t, 30*time.Second)
	a := dial(t, []string{sharedServer}).Mutex(k)
	b := dial(t, []string{sharedServer}).Mutex(k)
	if err := a.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	if a.FencingToken() == 0 {
		t.Fatal("no fencing token on a grant")
	}
	if err := b.TryLock(ctx); !errors.Is(err, nacoslock.ErrLocked) {
		t.Fatalf("try lock while held: %v, want ErrLocked", err)
	}
	if v, _ := adminLock(t, sharedServer, nacoslock.NonReentrant, k); len(v.Waiters) != 0 {
		t.Fatalf("TryLock queued: %+v", v.Waiters)
	}
	tok := a.FencingToken()
	if err := a.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if a.FencingToken() != 0 || !closed(a.Lost()) || !errors.Is(a.Err(), nacoslock.ErrNotHeld) {
		t.Fatalf("after unlock: token %d, lost %v, err %v", a.FencingToken(), closed(a.Lost()), a.Err())
	}
	if err := a.Unlock(ctx); !errors.Is(err, nacoslock.ErrNotHeld) {
		t.Fatalf("second unlock: %v, want ErrNotHeld", err)
	}
	if err := b.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	if b.FencingToken() <= tok {
		t.Fatalf("token %d after %d", b.FencingToken(), tok)
	}
}

// TestKinds: REENTRANT counts holds on the server; NON_REENTRANT refuses
// a second hold locally; one key under two kinds is two locks.
func TestKinds(t *testing.T) {
	k := key(t)
	ctx := ctxFor(t, 30*time.Second)
	cl := dial(t, []string{sharedServer})
	other := dial(t, []string{sharedServer})

	r := cl.Mutex(k, nacoslock.WithKind(nacoslock.Reentrant))
	for range 2 {
		if err := r.Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	lost := r.Lost()
	if err := r.TryLock(ctx); err != nil {
		t.Fatal(err)
	}
	if r.Lost() != lost {
		t.Fatal("a re-entry started a hold of its own: Lost changed")
	}
	if v, _ := adminLock(t, sharedServer, nacoslock.Reentrant, k); v.ReentrantCount != 3 || v.Owner != r.Owner() {
		t.Fatalf("server view after three holds: %+v", v)
	}
	if held, n := r.Held(); !held || n != 3 {
		t.Fatalf("Held() = %v, %d", held, n)
	}
	for i := range 2 {
		if err := r.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := other.Mutex(k, nacoslock.WithKind(nacoslock.Reentrant)).TryLock(ctx); !errors.Is(err, nacoslock.ErrLocked) {
			t.Fatalf("after %d of 3 unlocks another owner got: %v", i+1, err)
		}
	}
	if closed(r.Lost()) {
		t.Fatal("Lost closed while still held once")
	}
	if err := r.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, held := adminLock(t, sharedServer, nacoslock.Reentrant, k); held {
		t.Fatal("still held after as many unlocks as locks")
	}

	n := cl.Mutex(k)
	if err := n.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Lock(ctx); !errors.Is(err, nacoslock.ErrReentry) {
		t.Fatalf("second Lock of a non-reentrant Mutex: %v, want ErrReentry", err)
	}
	if err := n.TryLock(ctx); !errors.Is(err, nacoslock.ErrReentry) {
		t.Fatalf("TryLock of a held non-reentrant Mutex: %v, want ErrReentry", err)
	}
	// The same key as NACOS_LOCK is another lock, free although the
	// NON_REENTRANT one is held.
	l := other.Mutex(k, nacoslock.WithKind(nacoslock.Legacy))
	if err := l.TryLock(ctx); err != nil {
		t.Fatalf("NACOS_LOCK of a key held as NON_REENTRANT: %v", err)
	}
	if err := l.TryLock(ctx); !errors.Is(err, nacoslock.ErrReentry) {
		t.Fatalf("NACOS_LOCK is not reentrant: %v", err)
	}
	for _, m := range []*nacoslock.Mutex{n, l} {
		if err := m.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestWatchdogKeepsLock: a lock held for more than two leases stays held,
// under one grant, because the watchdog renews it.
func TestWatchdogKeepsLock(t *testing.T) {
	k := key(t)
	ctx := ctxFor(t, 30*time.Second)
	// Short leases, but not so short that a stall of the machine costs
	// the lock (seen with a 1.5 s lease, the server at nice 19 beside a
	// busy benchmark): the watchdog renews every second.
	m := dial(t, []string{sharedServer}).Mutex(k, nacoslock.WithLease(3*time.Second))
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tok := m.FencingToken()
	time.Sleep(7 * time.Second)
	if closed(m.Lost()) {
		t.Fatalf("lost: %v", m.Err())
	}
	v, held := adminLock(t, sharedServer, nacoslock.NonReentrant, k)
	if !held || v.Owner != m.Owner() || v.FencingToken != tok {
		t.Fatalf("after two leases: held %v, %+v, want owner %s token %d", held, v, m.Owner(), tok)
	}
	if err := dial(t, []string{sharedServer}).Mutex(k).TryLock(ctx); !errors.Is(err, nacoslock.ErrLocked) {
		t.Fatalf("another owner after two leases: %v", err)
	}
	if err := m.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLostWhenTakenAway: an operator force-releases the lock; the next
// renewal is refused, Lost closes, Err says why, and the next holder's
// fencing token is higher.
func TestLostWhenTakenAway(t *testing.T) {
	k := key(t)
	ctx := ctxFor(t, 30*time.Second)
	m := dial(t, []string{sharedServer}).Mutex(k, nacoslock.WithLease(1500*time.Millisecond))
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	tok := m.FencingToken()
	resp, err := http.Post(fmt.Sprintf("http://%s/v1/locks/%s/force-release?key=%s", sharedServer, nacoslock.NonReentrant, url.QueryEscape(k)), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("force release: HTTP %d", resp.StatusCode)
	}
	next := dial(t, []string{sharedServer}).Mutex(k)
	if err := next.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-m.Lost():
	case <-ctx.Done():
		t.Fatal("Lost not closed after the lock was taken away")
	}
	if !errors.Is(m.Err(), nacoslock.ErrLost) {
		t.Fatalf("Err after the loss: %v, want ErrLost", m.Err())
	}
	if next.FencingToken() <= tok {
		t.Fatalf("next holder's token %d, lost holder's %d", next.FencingToken(), tok)
	}
	if err := m.Unlock(ctx); !errors.Is(err, nacoslock.ErrNotHeld) || !errors.Is(err, nacoslock.ErrLost) {
		t.Fatalf("unlock of a lost lock: %v", err)
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestLocker: goroutines of several clients sharing sync.Lockers keep a
// counter exact.
func TestLocker(t *testing.T) {
	k := key(t)
	var counter atomic.Int64
	var wg sync.WaitGroup
	for range 2 {
		l := dial(t, []string{sharedServer}).Mutex(k, nacoslock.WithKind(nacoslock.Reentrant)).Locker()
		for range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 5 {
					l.Lock()
					v := counter.Load()
					time.Sleep(time.Millisecond)
					counter.Store(v + 1)
					l.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if got := counter.Load(); got != 30 {
		t.Fatalf("counter = %d, want 30", got)
	}
}

// TestClientIdentity: the client name and version reach the server's
// connection list.
func TestClientIdentity(t *testing.T) {
	dial(t, []string{sharedServer}, nacoslock.WithClientName("billing-worker"), nacoslock.WithNamespace("prod"))
	resp, err := http.Get("http://" + sharedServer + "/v1/connections")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Connections []struct {
			AppName       string `json:"appName"`
			ClientVersion string `json:"clientVersion"`
		} `json:"connections"`
	}
	if err := jsonDecode(resp, &out); err != nil {
		t.Fatal(err)
	}
	for _, c := range out.Connections {
		if c.AppName == "billing-worker" && c.ClientVersion != "" {
			return
		}
	}
	t.Fatalf("no connection named billing-worker in %+v", out.Connections)
}

// TestCloseEndsHolds: closing the Client ends its holds (Lost, ErrClosed)
// and its connection, which makes the server free the lock at once (the
// disconnect grace is 0 by default) for the next owner.
func TestCloseEndsHolds(t *testing.T) {
	k := key(t)
	ctx := ctxFor(t, 30*time.Second)
	cl, err := nacoslock.Dial(ctx, []string{sharedServer})
	if err != nil {
		t.Fatal(err)
	}
	m := cl.Mutex(k)
	if err := m.Lock(ctx); err != nil {
		t.Fatal(err)
	}
	next := dial(t, []string{sharedServer}).Mutex(k)
	got := make(chan error, 1)
	go func() { got <- next.Lock(ctx) }()
	waitQueued(t, sharedServer, nacoslock.NonReentrant, k, 1)
	if err := cl.Close(); err != nil {
		t.Fatal(err)
	}
	if !closed(m.Lost()) || !errors.Is(m.Err(), nacoslock.ErrClosed) {
		t.Fatalf("after Close: lost %v, err %v", closed(m.Lost()), m.Err())
	}
	if err := <-got; err != nil {
		t.Fatalf("next owner after the holder's client closed: %v", err)
	}
	if err := m.Lock(ctx); !errors.Is(err, nacoslock.ErrClosed) {
		t.Fatalf("lock on a closed client: %v, want ErrClosed", err)
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
