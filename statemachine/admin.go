package statemachine

import (
	"context"
	"fmt"
	"time"

	"nacos-lockd/statemachine/lockview"
)

// The admin API's reads and its force release (gateway/admin.Locks), on
// Node and on Local. Reads go through Lookup: linearizable by default
// (ReadIndex: the replica first catches up with the leader's commit
// index), or, with stale, whatever this replica has applied.

// MaxListLimit caps one page of ListLocks: Lookup holds the table's read
// lock while it builds the page, and apply waits for it.
const MaxListLimit = lockview.MaxListLimit

// DefaultListLimit is the page size when a query names none.
const DefaultListLimit = lockview.DefaultListLimit

// ListLocks reads one page of held locks.
func (n *Node) ListLocks(ctx context.Context, q lockview.Query, stale bool) (lockview.Page, error) {
	lq, err := listQuery(q)
	if err != nil {
		return lockview.Page{}, err
	}
	v, err := n.read(ctx, lq, stale)
	if err != nil {
		return lockview.Page{}, fmt.Errorf("list locks: %w", err)
	}
	return pageView(v.(LockPage)), nil
}

// GetLock reads one lock; lockview.ErrNotFound when it is free.
func (n *Node) GetLock(ctx context.Context, lockType, key string, stale bool) (lockview.Lock, error) {
	kind, ok := ParseKind(lockType)
	if !ok {
		return lockview.Lock{}, unknownType(lockType)
	}
	v, err := n.read(ctx, LockQuery{Kind: kind, Key: key}, stale)
	if err != nil {
		return lockview.Lock{}, fmt.Errorf("read lock: %w", err)
	}
	return lockFound(v.(LockInfo))
}

// ForceRelease commits FORCE_RELEASE: the lock is released whoever holds
// it and passes to its next waiter. A non-zero token limits it to that
// grant (lockview.ErrChanged otherwise); lockview.ErrNotFound when the lock
// is free.
func (n *Node) ForceRelease(ctx context.Context, lockType, key string, token uint64) error {
	cmd, err := forceReleaseCommand(lockType, key, token, time.Now())
	if err != nil {
		return err
	}
	res, err := n.Propose(ctx, cmd)
	if err != nil {
		return err
	}
	return forceReleaseResult(res)
}

// read answers q from the local replica, after a ReadIndex round unless
// stale. ctx bounds the ReadIndex round.
func (n *Node) read(ctx context.Context, q any, stale bool) (any, error) {
	if stale {
		return n.nh.StaleRead(n.cfg.ShardID, q)
	}
	var v any
	err := retryRead(ctx, func(actx context.Context) (err error) {
		v, err = n.nh.SyncRead(actx, n.cfg.ShardID, q)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return v, nil
}

// ListLocks reads one page of held locks (a local table is always
// current: stale changes nothing).
func (l *Local) ListLocks(ctx context.Context, q lockview.Query, _ bool) (lockview.Page, error) {
	lq, err := listQuery(q)
	if err != nil {
		return lockview.Page{}, err
	}
	if err := ctx.Err(); err != nil {
		return lockview.Page{}, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return pageView(l.t.List(lq)), nil
}

// GetLock reads one lock; lockview.ErrNotFound when it is free.
func (l *Local) GetLock(ctx context.Context, lockType, key string, _ bool) (lockview.Lock, error) {
	kind, ok := ParseKind(lockType)
	if !ok {
		return lockview.Lock{}, unknownType(lockType)
	}
	if err := ctx.Err(); err != nil {
		return lockview.Lock{}, err
	}
	return lockFound(l.Lock(kind, key))
}

// ForceRelease applies FORCE_RELEASE (see Node.ForceRelease).
func (l *Local) ForceRelease(ctx context.Context, lockType, key string, token uint64) error {
	cmd, err := forceReleaseCommand(lockType, key, token, time.Now())
	if err != nil {
		return err
	}
	res, err := l.Propose(ctx, cmd)
	if err != nil {
		return err
	}
	return forceReleaseResult(res)
}

func unknownType(lockType string) error {
	return fmt.Errorf("%w %q: expected NACOS_LOCK, REENTRANT or NON_REENTRANT", lockview.ErrUnknownType, lockType)
}

func listQuery(q lockview.Query) (ListQuery, error) {
	lq := ListQuery{Prefix: q.Prefix, AfterKey: q.AfterKey, Limit: q.Limit}
	if q.Type != "" {
		k, ok := ParseKind(q.Type)
		if !ok {
			return ListQuery{}, unknownType(q.Type)
		}
		lq.Kind = k
	}
	if q.AfterType != "" {
		k, ok := ParseKind(q.AfterType)
		if !ok {
			return ListQuery{}, unknownType(q.AfterType)
		}
		lq.AfterKind = k
	}
	switch {
	case lq.Limit <= 0:
		lq.Limit = DefaultListLimit
	case lq.Limit > MaxListLimit:
		lq.Limit = MaxListLimit
	}
	return lq, nil
}

func forceReleaseCommand(lockType, key string, token uint64, now time.Time) (Command, error) {
	kind, ok := ParseKind(lockType)
	if !ok {
		return Command{}, unknownType(lockType)
	}
	if key == "" {
		return Command{}, fmt.Errorf("force release: %w: empty key", lockview.ErrNotFound)
	}
	return Command{Op: OpForceRelease, NowMs: now.UnixMilli(), Kind: kind, Key: key, Token: token}, nil
}

func forceReleaseResult(res Result) error {
	switch res.Code {
	case CodeOK:
		return nil
	case CodeNotFound:
		return lockview.ErrNotFound
	case CodeNotOwner:
		return lockview.ErrChanged
	}
	return fmt.Errorf("force release: %s", res.Code)
}

func lockFound(info LockInfo) (lockview.Lock, error) {
	if !info.Found {
		return lockview.Lock{}, lockview.ErrNotFound
	}
	return lockView(info), nil
}

func pageView(p LockPage) lockview.Page {
	out := lockview.Page{More: p.More, Applied: p.Applied, Locks: make([]lockview.Lock, len(p.Locks))}
	for i, l := range p.Locks {
		out.Locks[i] = lockView(l)
	}
	return out
}

func lockView(info LockInfo) lockview.Lock {
	v := lockview.Lock{
		Type: info.Kind.String(), Key: info.Key, Owner: info.Owner, ConnID: info.ConnID, Count: info.Count,
		Token: info.Token, AcquiredAtMs: info.AcquiredAt, LeaseEndMs: info.LeaseEnd, Unclaimed: info.Unclaimed,
	}
	if len(info.Waiters) > 0 {
		v.Waiters = make([]lockview.Waiter, len(info.Waiters))
		for i, w := range info.Waiters {
			v.Waiters[i] = lockview.Waiter{Owner: w.Owner, ConnID: w.ConnID, DeadlineMs: w.Deadline}
		}
	}
	return v
}
