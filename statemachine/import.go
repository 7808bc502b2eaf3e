package statemachine

import (
	"fmt"
	"slices"
)

// ImportedLock is one lock from another system (a Nacos snapshot), in
// plain values, for NewImportedTable. The statemachine knows nothing of
// where it came from.
type ImportedLock struct {
	Kind       Kind
	Key        string
	Owner      string // "" means free
	ConnID     string // "" means no connection: only release or the lease ends it
	Count      int32  // reentrant count; a held lock counts at least 1
	LeaseEndMs int64  // the lease is over once the clock is past it
	Waiters    []ImportedWaiter
}

// ImportedWaiter is one queued waiter of an ImportedLock, in queue order.
type ImportedWaiter struct {
	Owner      string
	ConnID     string
	EnqueuedMs int64
	DeadlineMs int64 // the waiter is dead once the clock reaches it
	LeaseMs    int64 // lease granted if the lock is handed to it; > 0
}

// ImportSummary counts what NewImportedTable did with its input.
type ImportSummary struct {
	Locks          int    // entries in the table: Held + HandedOff
	Held           int    // held as imported
	HandedOff      int    // free (or expired) with live waiters: granted to the first, unclaimed
	Expired        int    // held, but the lease had ended by the clock: dropped, or handed off
	Free           int    // free (not expired) with nobody waiting: dropped
	Waiters        int    // waiters kept in queues
	WaitersDropped int    // deadline passed, owner queued twice (later entries), or the holder itself
	TokenBase      uint64 // = Locks: imported tokens are 1..Locks in key order
}

// NewImportedTable builds a table from imported locks as our table would
// hold them at clockMs (Unix ms, the import time), applying the rules every
// apply does (settle): dead waiters are dropped, ended leases are freed, a
// free lock passes to its first live waiter as an unclaimed grant, and a
// free lock nobody waits for is dropped. The locks that remain get fencing
// tokens 1..N in (kind, key) order, and the table's fence and token base
// are N, so grants made after the import get higher tokens.
//
// The table's applied index is 0: install it with InstallFresh. The input
// order does not matter; a (kind, key) given twice, an unknown kind, an
// empty key or owner where one is needed, a negative count or a waiter
// without a positive lease is refused.
func NewImportedTable(locks []ImportedLock, clockMs int64) (*Table, ImportSummary, error) {
	var sum ImportSummary
	sorted := slices.Clone(locks)
	slices.SortStableFunc(sorted, func(a, b ImportedLock) int {
		return compareIDs(lockID{a.Kind, a.Key}, lockID{b.Kind, b.Key})
	})
	t := NewTable()
	t.clock = clockMs
	var token uint64
	for i, il := range sorted {
		id := lockID{il.Kind, il.Key}
		if err := il.validate(); err != nil {
			return nil, sum, err
		}
		if i > 0 && compareIDs(lockID{sorted[i-1].Kind, sorted[i-1].Key}, id) == 0 {
			return nil, sum, fmt.Errorf("import: lock %s %q appears twice", il.Kind, il.Key)
		}
		l := &lockState{owner: intern(il.Owner), connID: intern(il.ConnID), count: il.Count, leaseEnd: il.LeaseEndMs}
		if l.held() {
			l.count = max(l.count, 1)
		} else {
			l.connID, l.count, l.leaseEnd = "", 0, 0
		}
		seen := map[string]bool{}
		for _, w := range il.Waiters {
			if clockMs >= w.DeadlineMs || seen[w.Owner] || w.Owner == l.owner {
				sum.WaitersDropped++
				continue
			}
			seen[w.Owner] = true
			l.setQueue(append(l.queue(), waiter{owner: intern(w.Owner), connID: intern(w.ConnID), enqueued: w.EnqueuedMs, deadline: w.DeadlineMs, leaseMs: w.LeaseMs}))
		}
		expired := l.held() && l.leaseOver(clockMs)
		if expired {
			sum.Expired++
			l.free()
		}
		switch {
		case l.held():
			sum.Held++
		case len(l.queue()) > 0:
			w := l.queue()[0]
			l.setQueue(l.queue()[1:])
			l.owner, l.connID, l.count, l.unclaimed = w.owner, w.connID, 1, true
			l.leaseEnd = t.leaseEnd(w.leaseMs)
			l.acquiredAt = clockMs // granted now; a lock held as imported keeps 0, unknown
			sum.HandedOff++
		default:
			if !expired {
				sum.Free++
			}
			continue
		}
		token++
		l.token = token
		sum.Waiters += len(l.queue())
		t.put(id, l)
	}
	t.fence, t.tokenBase = token, token
	sum.Locks, sum.TokenBase = int(token), token
	return t, sum, nil
}

func (il ImportedLock) validate() error {
	name := fmt.Sprintf("import: lock %s %q", il.Kind, il.Key)
	switch {
	case !il.Kind.valid():
		return fmt.Errorf("import: lock %q has unknown kind %d", il.Key, il.Kind)
	case il.Key == "":
		return fmt.Errorf("import: %s lock with an empty key", il.Kind)
	case il.Count < 0:
		return fmt.Errorf("%s: negative count %d", name, il.Count)
	case il.Owner == "" && il.Count > 0:
		return fmt.Errorf("%s: count %d without an owner", name, il.Count)
	}
	for _, w := range il.Waiters {
		if w.Owner == "" || w.LeaseMs <= 0 {
			return fmt.Errorf("%s: waiter %q needs an owner and a positive lease (%d ms)", name, w.Owner, w.LeaseMs)
		}
	}
	return nil
}
