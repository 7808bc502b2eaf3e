package statemachine

import "fmt"

// ExpiredQuery asks for held locks whose lease ended before NowMs (the
// reaper's wall clock), oldest first, at most Limit of them.
type ExpiredQuery struct {
	NowMs int64
	Limit int
}

// ExpiredLease is a lease the reaper may propose to end.
type ExpiredLease struct {
	Kind     Kind
	Key      string
	Token    uint64
	LeaseEnd int64
}

// LockQuery asks for one lock's state.
type LockQuery struct {
	Kind Kind
	Key  string
}

// LockInfo is one lock as the table holds it. Found is false for a free
// lock nobody waits for.
type LockInfo struct {
	Found     bool
	Kind      Kind
	Key       string
	Owner     string
	ConnID    string
	Count     int32
	LeaseEnd  int64
	Token     uint64
	Unclaimed bool
	Waiters   []WaiterInfo
}

// WaiterInfo is one queued waiter.
type WaiterInfo struct {
	Owner    string
	ConnID   string
	Deadline int64
}

// StatsQuery asks for table-wide figures.
type StatsQuery struct{}

// Stats are table-wide figures.
type Stats struct {
	Locks   int // entries: held or with waiters
	Held    int
	Queued  int
	Applied uint64
	Clock   int64
	Fence   uint64
}

func (t *Table) lookup(q interface{}) (interface{}, error) {
	switch q := q.(type) {
	case ExpiredQuery:
		return t.Expired(q.NowMs, q.Limit), nil
	case LockQuery:
		return t.Lock(q.Kind, q.Key), nil
	case StatsQuery:
		return t.Stats(), nil
	}
	return nil, fmt.Errorf("unknown lookup %T", q)
}

// Expired lists leases that ended before nowMs, oldest first.
func (t *Table) Expired(nowMs int64, limit int) []ExpiredLease {
	var out []ExpiredLease
	t.leases.Ascend(func(it leaseItem) bool {
		if it.end >= nowMs || len(out) >= limit {
			return false
		}
		out = append(out, ExpiredLease{Kind: it.id.kind, Key: it.id.key, Token: t.locks[it.id].token, LeaseEnd: it.end})
		return true
	})
	return out
}

// Lock reports one lock's state.
func (t *Table) Lock(kind Kind, key string) LockInfo {
	l, ok := t.locks[lockID{kind, key}]
	if !ok {
		return LockInfo{Kind: kind, Key: key}
	}
	info := LockInfo{
		Found: true, Kind: kind, Key: key, Owner: l.owner, ConnID: l.connID, Count: l.count,
		LeaseEnd: l.leaseEnd, Token: l.token, Unclaimed: l.unclaimed,
	}
	for _, w := range l.waiters {
		info.Waiters = append(info.Waiters, WaiterInfo{Owner: w.owner, ConnID: w.connID, Deadline: w.deadline})
	}
	return info
}

// Stats reports table-wide figures.
func (t *Table) Stats() Stats {
	return Stats{Locks: len(t.locks), Held: t.held, Queued: t.queued, Applied: t.applied, Clock: t.clock, Fence: t.fence}
}
