package replica

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"nacos-lockd/replica/replicatest"
	"nacos-lockd/statemachine"
	"nacos-lockd/statemachine/lockview"
)

func TestLocalAdminReads(t *testing.T) {
	var notes []statemachine.Notification
	l := replicatest.NewLocal(func(n []statemachine.Notification) { notes = append(notes, n...) })
	ctx := context.Background()
	now := time.Now().UnixMilli()
	l.Propose(ctx, acq(R, "a/b", "o1", "c1", now, 60000, 0))
	l.Propose(ctx, acq(R, "a/b", "o2", "c2", now, 60000, 60000))
	l.Propose(ctx, acq(N, "x", "o1", "c1", now, 60000, 0))
	checkAdminReads(t, l)
	if len(notes) != 1 || notes[0].Owner != "o2" {
		t.Fatalf("hand-off after the force release not notified: %+v", notes)
	}
}

func TestNodeAdminReads(t *testing.T) { forEachEngine(t, testNodeAdminReads) }

func testNodeAdminReads(t *testing.T, engine string) {
	env := &nodeEnv{engine: engine, dir: t.TempDir(), addr: freeAddr(t)}
	n, db := env.start(t)
	defer db.Close()
	defer n.Close()
	now := time.Now().UnixMilli()
	propose(t, n, acq(R, "a/b", "o1", "c1", now, 60000, 0))
	propose(t, n, acq(R, "a/b", "o2", "c2", now, 60000, 60000))
	propose(t, n, acq(N, "x", "o1", "c1", now, 60000, 0))
	checkAdminReads(t, n)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if p, err := n.ListLocks(ctx, lockview.Query{}, true); err != nil || len(p.Locks) != 2 {
		t.Fatalf("stale list: %+v %v", p, err)
	}
	env.mu.Lock()
	defer env.mu.Unlock()
	if len(env.notes) != 1 || env.notes[0].Owner != "o2" {
		t.Fatalf("hand-off after the force release not notified: %+v", env.notes)
	}
}

type adminReader interface {
	ListLocks(ctx context.Context, q lockview.Query, stale bool) (lockview.Page, error)
	GetLock(ctx context.Context, lockType, key string, stale bool) (lockview.Lock, error)
	ForceRelease(ctx context.Context, lockType, key string, token uint64) error
}

// checkAdminReads works on a table holding REENTRANT "a/b" (o1, o2
// waiting) and NON_REENTRANT "x" (o1).
func checkAdminReads(t *testing.T, r adminReader) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p, err := r.ListLocks(ctx, lockview.Query{}, false)
	if err != nil || len(p.Locks) != 2 || p.More || p.Applied < 3 {
		t.Fatalf("list: %+v %v", p, err)
	}
	ab := p.Locks[0]
	if ab.Type != "REENTRANT" || ab.Key != "a/b" || ab.Owner != "o1" || ab.ConnID != "c1" || ab.Count != 1 || ab.Token == 0 ||
		ab.AcquiredAtMs == 0 || ab.LeaseEndMs != ab.AcquiredAtMs+60000 || len(ab.Waiters) != 1 || ab.Waiters[0].Owner != "o2" ||
		ab.Waiters[0].DeadlineMs != ab.AcquiredAtMs+60000 {
		t.Fatalf("listed lock: %+v", ab)
	}
	if p, err := r.ListLocks(ctx, lockview.Query{Limit: 1, AfterType: "REENTRANT", AfterKey: "a/b"}, false); err != nil || len(p.Locks) != 1 || p.Locks[0].Key != "x" {
		t.Fatalf("second page: %+v %v", p, err)
	}
	if p, err := r.ListLocks(ctx, lockview.Query{Limit: 1}, false); err != nil || !p.More {
		t.Fatalf("first page of one: %+v %v", p, err)
	}
	for _, q := range []lockview.Query{{Type: "reentrant"}, {AfterType: "MUTEX"}} {
		if _, err := r.ListLocks(ctx, q, false); !errors.Is(err, lockview.ErrUnknownType) {
			t.Fatalf("%+v: %v", q, err)
		}
	}
	if got, err := r.GetLock(ctx, "REENTRANT", "a/b", false); err != nil || fmt.Sprint(got) != fmt.Sprint(ab) {
		t.Fatalf("get: %+v %v", got, err)
	}
	if _, err := r.GetLock(ctx, "NACOS_LOCK", "a/b", false); !errors.Is(err, lockview.ErrNotFound) {
		t.Fatalf("get of a free lock: %v", err)
	}
	if _, err := r.GetLock(ctx, "nope", "a/b", false); !errors.Is(err, lockview.ErrUnknownType) {
		t.Fatalf("get with a bad type: %v", err)
	}
	if err := r.ForceRelease(ctx, "REENTRANT", "a/b", ab.Token+1000); !errors.Is(err, lockview.ErrChanged) {
		t.Fatalf("force release naming another grant: %v", err)
	}
	if err := r.ForceRelease(ctx, "REENTRANT", "a/b", ab.Token); err != nil {
		t.Fatalf("force release: %v", err)
	}
	if got, err := r.GetLock(ctx, "REENTRANT", "a/b", false); err != nil || got.Owner != "o2" || !got.Unclaimed || got.Token <= ab.Token {
		t.Fatalf("after force release: %+v %v", got, err)
	}
	if err := r.ForceRelease(ctx, "NACOS_LOCK", "x", 0); !errors.Is(err, lockview.ErrNotFound) {
		t.Fatalf("force release of a free lock: %v", err)
	}
	if err := r.ForceRelease(ctx, "bad", "x", 0); !errors.Is(err, lockview.ErrUnknownType) {
		t.Fatalf("force release with a bad type: %v", err)
	}
}
