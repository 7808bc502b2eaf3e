// Package replicatest holds Local, an in-memory stand-in for replica.Node
// that the gateway's tests run the real lock rules on, without Raft or
// storage (and without importing either).
package replicatest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"nacos-lockd/statemachine"
	"nacos-lockd/statemachine/lockview"
)

// Local applies commands straight to an in-memory table, without Raft or
// storage, numbering entries itself. It implements everything replica.Node
// does for the gateway (gateway.Table, control.Table) and the admin API
// (admin.Locks), so gateway tests run the real lock rules without a Raft
// group; what a single in-memory table cannot do is a documented no-op
// (TransferLeadership).
type Local struct {
	mu     sync.Mutex
	t      *statemachine.Table
	index  uint64
	notify func([]statemachine.Notification)
}

// NewLocal returns an empty local table; notify may be nil.
func NewLocal(notify func([]statemachine.Notification)) *Local {
	return &Local{t: statemachine.NewTable(), notify: notify}
}

// Propose applies cmd as the next entry.
func (l *Local) Propose(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error) {
	if err := ctx.Err(); err != nil {
		return statemachine.Result{}, err
	}
	l.mu.Lock()
	l.index++
	res := l.t.Apply(l.index, cmd)
	l.t.DiscardChanges()
	notes := l.t.TakeNotifications()
	l.mu.Unlock()
	if len(notes) > 0 && l.notify != nil {
		l.notify(notes)
	}
	return res, nil
}

// Record applies cmd at once: a local table has no queue to order. As
// replica.Node.Record, a refused command is reported on the channel.
func (l *Local) Record(_ time.Time, cmd statemachine.Command) (<-chan error, error) {
	res, err := l.Propose(context.Background(), cmd)
	done := make(chan error, 1)
	switch {
	case err != nil:
		done <- err
		return done, err
	case res.Code != statemachine.CodeOK:
		done <- fmt.Errorf("%s refused: %s", cmd.Op, res.Code)
	default:
		done <- nil
	}
	return done, nil
}

// LockLinearizable reads one lock; every read of a local table is current.
func (l *Local) LockLinearizable(_ context.Context, kind statemachine.Kind, key string) (lockview.Lock, error) {
	return l.Lock(kind, key), nil
}

// LockIfSoleVoter reads one lock: a local table is its only replica.
func (l *Local) LockIfSoleVoter(kind statemachine.Kind, key string) (lockview.Lock, bool) {
	return l.Lock(kind, key), true
}

// NextGrant reports whom a RELEASE by owner would hand the lock to.
func (l *Local) NextGrant(kind statemachine.Kind, key, owner string) statemachine.NextGrant {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.NextGrant(kind, key, owner)
}

// IsLeader is always true: a local table is its own leader.
func (l *Local) IsLeader() bool { return true }

// TransferLeadership does nothing and returns nil: a local table has no
// other replica to hand over to, as a Node alone has not.
func (l *Local) TransferLeadership(context.Context) error { return nil }

// Expired lists leases that ended before nowMs.
func (l *Local) Expired(nowMs int64, limit int) ([]statemachine.ExpiredLease, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.Expired(nowMs, limit), nil
}

// Lock reports one lock's state.
func (l *Local) Lock(kind statemachine.Kind, key string) lockview.Lock {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.Lock(kind, key)
}

// Stats reports table-wide figures.
func (l *Local) Stats() statemachine.Stats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.Stats()
}

// Nodes lists the node ids whose connections the table references, as
// Node.Nodes does.
func (l *Local) Nodes() ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.Nodes(), nil
}

// Conns lists one node's connections referenced by the table, as
// Node.Conns does.
func (l *Local) Conns(node string) ([]string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.Conns(node), nil
}

// ListLocks reads one page of held locks (a local table is always
// current: stale changes nothing).
func (l *Local) ListLocks(ctx context.Context, q lockview.Query, _ bool) (lockview.Page, error) {
	lq, err := statemachine.ListQueryFor(q)
	if err != nil {
		return lockview.Page{}, err
	}
	if err := ctx.Err(); err != nil {
		return lockview.Page{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.t.List(lq), nil
}

// GetLock reads one lock; lockview.ErrNotFound when it is free.
func (l *Local) GetLock(ctx context.Context, lockType, key string, _ bool) (lockview.Lock, error) {
	kind, err := statemachine.ParseLockType(lockType)
	if err != nil {
		return lockview.Lock{}, err
	}
	if err := ctx.Err(); err != nil {
		return lockview.Lock{}, err
	}
	return statemachine.FoundLock(l.Lock(kind, key))
}

// ForceRelease applies FORCE_RELEASE (see Node.ForceRelease).
func (l *Local) ForceRelease(ctx context.Context, lockType, key string, token uint64) error {
	cmd, err := statemachine.ForceReleaseCommand(lockType, key, token, time.Now().UnixMilli())
	if err != nil {
		return err
	}
	res, err := l.Propose(ctx, cmd)
	if err != nil {
		return err
	}
	return statemachine.ForceReleaseError(res)
}
