package cluster

import (
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"
)

// grant is one successful acquire, as a client saw it.
type grant struct {
	key, owner string
	token      uint64
	invoked    time.Time // ACQUIRE sent
	completed  time.Time // success received
	released   time.Time // RELEASE sent (zero: never sent)
	leaseMs    int64
}

// history collects grants from many client goroutines.
type history struct {
	mu     sync.Mutex
	grants []*grant
}

func (h *history) add(g *grant) {
	h.mu.Lock()
	h.grants = append(h.grants, g)
	h.mu.Unlock()
}

// check verifies, per key, that tokens are unique and that no grant
// completed while an earlier grant (lower token) could still be held: the
// earlier holder had not yet sent its release, and its lease could not
// yet have ended (a lease ends no earlier than invocation + lease, since
// the server stamps time after receiving the request).
func (h *history) check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	byKey := map[string][]*grant{}
	for _, g := range h.grants {
		byKey[g.key] = append(byKey[g.key], g)
	}
	for key, gs := range byKey {
		sort.Slice(gs, func(i, j int) bool { return gs[i].token < gs[j].token })
		for i := 1; i < len(gs); i++ {
			if gs[i].token == gs[i-1].token {
				return fmt.Errorf("key %s: token %d granted twice (%s and %s)", key, gs[i].token, gs[i-1].owner, gs[i].owner)
			}
		}
		for i, g := range gs {
			for _, later := range gs[i+1:] {
				heldUntil := g.invoked.Add(time.Duration(g.leaseMs) * time.Millisecond)
				if !g.released.IsZero() && g.released.Before(heldUntil) {
					heldUntil = g.released
				}
				if later.completed.Before(heldUntil) {
					return fmt.Errorf("key %s: %s got token %d at %s while %s (token %d, acquired %s) still held it until %s",
						key, later.owner, later.token, later.completed.Format(time.StampMicro), g.owner, g.token,
						g.completed.Format(time.StampMicro), heldUntil.Format(time.StampMicro))
				}
			}
		}
	}
	return nil
}

func (h *history) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.grants)
}

func TestHistoryCheckerCatchesOverlap(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ok := []*grant{
		{key: "k", owner: "a", token: 5, invoked: at(0), completed: at(2), released: at(10), leaseMs: 1000},
		{key: "k", owner: "b", token: 9, invoked: at(5), completed: at(12), released: at(20), leaseMs: 1000},
		// c got it after a's lease could have ended, without a release.
		{key: "j", owner: "a", token: 3, invoked: at(0), completed: at(1), leaseMs: 100},
		{key: "j", owner: "c", token: 7, invoked: at(50), completed: at(101), leaseMs: 100},
	}
	h := history{grants: ok}
	if err := h.check(); err != nil {
		t.Fatalf("legal history rejected: %v", err)
	}
	for name, bad := range map[string][]*grant{
		"granted before the release was sent": {
			{key: "k", owner: "a", token: 5, invoked: at(0), completed: at(2), released: at(10), leaseMs: 1000},
			{key: "k", owner: "b", token: 9, invoked: at(5), completed: at(8), released: at(20), leaseMs: 1000},
		},
		"granted before the lease could end": {
			{key: "j", owner: "a", token: 3, invoked: at(0), completed: at(1), leaseMs: 100},
			{key: "j", owner: "c", token: 7, invoked: at(50), completed: at(99), leaseMs: 100},
		},
		"token granted twice": {
			{key: "k", owner: "a", token: 5, invoked: at(0), completed: at(2), released: at(3), leaseMs: 1000},
			{key: "k", owner: "b", token: 5, invoked: at(5), completed: at(8), released: at(20), leaseMs: 1000},
		},
	} {
		h := history{grants: bad}
		if err := h.check(); err == nil {
			t.Errorf("%s: not caught", name)
		}
	}
}
