package replica

import (
	"context"
	"fmt"
	"time"

	"nacos-lockd/statemachine/lockview"

	"nacos-lockd/statemachine"
)

// The admin API's reads and its force release (gateway/admin.Locks), on
// Node (replicatest.Local's are in its local.go; the mapping of queries and
// force release in statemachine/adminview.go).
// Reads go through Lookup: linearizable by default
// (ReadIndex: the replica first catches up with the leader's commit
// index), or, with stale, whatever this replica has applied.

// ListLocks reads one page of held locks.
func (n *Node) ListLocks(ctx context.Context, q lockview.Query, stale bool) (lockview.Page, error) {
	lq, err := statemachine.ListQueryFor(q)
	if err != nil {
		return lockview.Page{}, err
	}
	v, err := n.read(ctx, lq, stale)
	if err != nil {
		return lockview.Page{}, fmt.Errorf("list locks: %w", err)
	}
	return v.(lockview.Page), nil
}

// GetLock reads one lock; lockview.ErrNotFound when it is free.
func (n *Node) GetLock(ctx context.Context, lockType, key string, stale bool) (lockview.Lock, error) {
	kind, err := statemachine.ParseLockType(lockType)
	if err != nil {
		return lockview.Lock{}, err
	}
	v, err := n.read(ctx, statemachine.LockQuery{Kind: kind, Key: key}, stale)
	if err != nil {
		return lockview.Lock{}, fmt.Errorf("read lock: %w", err)
	}
	return statemachine.FoundLock(v.(lockview.Lock))
}

// ForceRelease commits FORCE_RELEASE: the lock is released whoever holds
// it and passes to its next waiter. A non-zero token limits it to that
// grant (lockview.ErrChanged otherwise); lockview.ErrNotFound when the lock
// is free.
func (n *Node) ForceRelease(ctx context.Context, lockType, key string, token uint64) error {
	cmd, err := statemachine.ForceReleaseCommand(lockType, key, token, time.Now().UnixMilli())
	if err != nil {
		return err
	}
	res, err := n.Propose(ctx, cmd)
	if err != nil {
		return err
	}
	return statemachine.ForceReleaseError(res)
}

// read answers q from the local replica, after a ReadIndex round unless
// stale. ctx bounds the ReadIndex round.
func (n *Node) read(ctx context.Context, q any, stale bool) (any, error) {
	if stale || n.solo != nil { // a sole voter's every read is linearizable
		return n.staleRead(q)
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
