package statemachine

import (
	"fmt"

	"nacos-lockd/statemachine/lockview"
)

// The admin API's reads and force release in its own plain values
// (lockview): the mapping of its queries to the table's and of force
// release to its command and back, shared by every implementation of
// gateway/admin.Locks. The table answers in lockview.Lock already.

// MaxListLimit caps one page of ListLocks: Lookup holds the table's read
// lock while it builds the page, and apply waits for it.
const MaxListLimit = lockview.MaxListLimit

// DefaultListLimit is the page size when a query names none.
const DefaultListLimit = lockview.DefaultListLimit

// ParseLockType reads an admin API lock type; the error wraps
// lockview.ErrUnknownType.
func ParseLockType(lockType string) (Kind, error) {
	kind, ok := ParseKind(lockType)
	if !ok {
		return 0, unknownType(lockType)
	}
	return kind, nil
}

func unknownType(lockType string) error {
	return fmt.Errorf("%w %q: expected NACOS_LOCK, REENTRANT or NON_REENTRANT", lockview.ErrUnknownType, lockType)
}

// ListQueryFor maps an admin API query onto the table's ListQuery, with
// the page size defaulted and capped.
func ListQueryFor(q lockview.Query) (ListQuery, error) {
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

// ForceReleaseCommand is the FORCE_RELEASE an admin's force release
// proposes, stamped with the proposer's clock (nowMs).
func ForceReleaseCommand(lockType, key string, token uint64, nowMs int64) (Command, error) {
	kind, err := ParseLockType(lockType)
	if err != nil {
		return Command{}, err
	}
	if key == "" {
		return Command{}, fmt.Errorf("force release: %w: empty key", lockview.ErrNotFound)
	}
	return Command{Op: OpForceRelease, NowMs: nowMs, Kind: kind, Key: key, Token: token}, nil
}

// ForceReleaseError maps FORCE_RELEASE's result to the admin API's
// answer: nil, lockview.ErrNotFound or lockview.ErrChanged.
func ForceReleaseError(res Result) error {
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

// FoundLock is a LockQuery answer as the admin API's GetLock returns it:
// lockview.ErrNotFound when the lock is free.
func FoundLock(l lockview.Lock) (lockview.Lock, error) {
	if !l.Found {
		return lockview.Lock{}, lockview.ErrNotFound
	}
	return l, nil
}
