package statemachine

import (
	"fmt"
	"slices"
	"strings"

	"nacos-lockd/connid"
	"nacos-lockd/statemachine/lockview"
)

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

// InHandOff reports whether the lock is granted to someone other than
// owner and not yet claimed: group commit's hint (replica's inHandOff),
// read on every blocking acquire.
func (t *Table) InHandOff(kind Kind, key, owner string) bool {
	l, ok := t.lookup(lockID{kind, key})
	return ok && l.unclaimed && l.owner != owner
}

// NextGrant answers whom a RELEASE by an owner would hand the lock to:
// the first live waiter, when the owner holds the lock exactly once (so
// that the release frees it) and its lease is not over. The gateway
// pushes to that waiter while the release commits (gateway/DESIGN.md,
// "Pushed ahead of the commit"); the answer is a hint read from the local
// replica, never a rule of the table: a wrong one costs the waiter a
// claim that finds nothing. Found is false when no hand-off is due;
// otherwise Owner and ConnID are the waiter's owner and the connection it
// queued on.
type NextGrant struct {
	Found  bool
	Owner  string
	ConnID string
}

// NextGrant names the waiter a RELEASE by owner would hand the lock to
// (see the type); it is read directly, not through Lookup, so it costs the
// gateway's release no allocation.
func (t *Table) NextGrant(kind Kind, key, owner string) NextGrant {
	l, ok := t.lookup(lockID{kind, key})
	// settle's rules, read without changing anything: a lease that is over
	// frees the lock before the release could, and dead waiters are skipped.
	if !ok || l.owner != owner || l.count != 1 || l.leaseOver(t.clock) {
		return NextGrant{}
	}
	for _, w := range l.queue() {
		if !w.dead(t.clock) {
			return NextGrant{Found: true, Owner: w.owner, ConnID: w.connID}
		}
	}
	return NextGrant{}
}

// NacosMonitorHelp is the help text of Nacos's nacos_monitor series: the
// gateway's request counters and the replica's aliveLockCount (Stats.Held)
// share the name, and every registration of it must use the same text.
const NacosMonitorHelp = "Nacos lock module series: request counters (success = granted, released or renewed) and aliveLockCount (held locks)."

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
	// TokenBase is added to a granting entry's index to make its token
	// (non-zero after an import or a restore).
	TokenBase uint64
	// Level is the cluster level (level.go).
	Level int
}

// Lookup answers one of the query values in this file, as the replica's
// reads ask them.
func (t *Table) Lookup(q interface{}) (interface{}, error) {
	switch q := q.(type) {
	case ExpiredQuery:
		return t.Expired(q.NowMs, q.Limit), nil
	case LockQuery:
		return t.Lock(q.Kind, q.Key), nil
	case StatsQuery:
		return t.Stats(), nil
	case LevelQuery:
		return t.level, nil
	case NodesQuery:
		return t.Nodes(), nil
	case ConnsQuery:
		return t.Conns(q.Node), nil
	case ListQuery:
		return t.List(q), nil
	case StateQuery:
		return t.StateBytes(), nil
	}
	return nil, fmt.Errorf("unknown lookup %T", q)
}

// StateQuery reads the whole table as snapshot content: what tests compare
// across replicas.
type StateQuery struct{}

// Expired lists leases that ended before nowMs, oldest first.
func (t *Table) Expired(nowMs int64, limit int) []ExpiredLease {
	var out []ExpiredLease
	t.leases.Ascend(func(l *lockState) bool {
		if l.leaseEnd >= nowMs || len(out) >= limit {
			return false
		}
		out = append(out, ExpiredLease{Kind: l.kind, Key: l.key, Token: l.token, LeaseEnd: l.leaseEnd})
		return true
	})
	return out
}

// Lock reports one lock's state; Found is false when it is free.
func (t *Table) Lock(kind Kind, key string) lockview.Lock {
	l, ok := t.lookup(lockID{kind, key})
	if !ok {
		return lockview.Lock{Type: kind.String(), Key: key, Clock: t.clock}
	}
	return t.view(l)
}

// view copies a lock out for a reader.
func (t *Table) view(l *lockState) lockview.Lock {
	v := lockview.Lock{
		Found: true, Type: l.kind.String(), Key: l.key, Owner: l.owner, ConnID: l.connID, Count: l.count,
		Token: l.token, AcquiredAtMs: l.acquiredAt, LeaseEndMs: l.leaseEnd, Unclaimed: l.unclaimed, Clock: t.clock,
	}
	if len(l.queue()) > 0 {
		v.Waiters = make([]lockview.Waiter, len(l.queue()))
		for i, w := range l.queue() {
			v.Waiters[i] = lockview.Waiter{Owner: w.owner, ConnID: w.connID, DeadlineMs: w.deadline}
		}
	}
	return v
}

// Stats reports table-wide figures.
func (t *Table) Stats() Stats {
	return Stats{Locks: t.locks.Len(), Held: t.held, Queued: t.queued, Applied: t.applied, Clock: t.clock, Fence: t.fence, TokenBase: t.tokenBase, Level: t.level}
}

// NodesQuery asks which nodes hold connections the table references
// (holders and waiters), by the node id connection ids end with
// (connid.NodeOf): "" stands for the connections no node of ours minted,
// such as Nacos's in an imported snapshot.
type NodesQuery struct{}

// ConnsQuery asks for the connections of one node the table references.
type ConnsQuery struct{ Node string }

// Nodes lists, sorted, the node ids of every referenced connection (""
// for connections of no node).
func (t *Table) Nodes() []string {
	set := map[string]struct{}{}
	for c := range t.conns {
		set[connid.NodeOf(c)] = struct{}{}
	}
	out := make([]string, 0, len(set))
	for n := range set {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Conns lists, sorted, the referenced connections of one node ("": of
// no node).
func (t *Table) Conns(node string) []string {
	var out []string
	for c := range t.conns {
		if connid.NodeOf(c) == node {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}

// ListQuery asks for one page of locks in (kind, key) order: of one Kind
// (0: every kind), whose key starts with Prefix, strictly after
// (AfterKind, AfterKey) (AfterKind 0: from the start), at most Limit of
// them (<= 0: no limit). Every lock in the table is held (see lockState).
type ListQuery struct {
	Kind      Kind
	Prefix    string
	AfterKind Kind
	AfterKey  string
	Limit     int
}

// List answers a ListQuery from the ordered index: each kind's matching
// keys are one contiguous range of it, so a page costs its own length plus
// a seek, however large the table.
func (t *Table) List(q ListQuery) lockview.Page {
	page := lockview.Page{Applied: t.applied}
	after := lockID{q.AfterKind, q.AfterKey}
	for kind := KindNacosLock; kind <= KindNonReentrant; kind++ {
		if (q.Kind != 0 && kind != q.Kind) || kind < q.AfterKind {
			continue
		}
		from := lockID{kind, q.Prefix}
		if kind == q.AfterKind && q.AfterKey > q.Prefix {
			from.key = q.AfterKey
		}
		t.locks.AscendGreaterOrEqual(&lockState{kind: from.kind, key: from.key}, func(l *lockState) bool {
			id := l.id()
			if id.kind != kind || !strings.HasPrefix(id.key, q.Prefix) {
				return false
			}
			if q.AfterKind != 0 && compareIDs(id, after) <= 0 {
				return true
			}
			if q.Limit > 0 && len(page.Locks) == q.Limit {
				page.More = true
				return false
			}
			page.Locks = append(page.Locks, t.view(l))
			return true
		})
		if page.More {
			break
		}
	}
	return page
}
