// Package lockview is the lock table as its readers see it: plain
// values, lock types as their Nacos strings and times as Unix
// milliseconds. The statemachine fills these values; the replica, the
// gateway and gateway/admin pass them on, so the admin API depends on
// neither Raft, storage nor the table's own types. It imports nothing of
// ours and nothing outside the standard library.
package lockview

import "errors"

// Errors a lock reader returns; callers branch on them with errors.Is.
var (
	// ErrNotFound: the lock is free (nobody holds it, nobody waits).
	ErrNotFound = errors.New("lock is not held")
	// ErrChanged: a force release named a fencing token, and the lock is
	// now held under another one (a new grant since it was read).
	ErrChanged = errors.New("lock is held under another fencing token")
	// ErrUnknownType: a lock type other than NACOS_LOCK, REENTRANT and
	// NON_REENTRANT.
	ErrUnknownType = errors.New("unknown lock type")
)

// Query asks for one page of held locks, in (type, key) order: NACOS_LOCK,
// REENTRANT, NON_REENTRANT, and keys by their bytes within a type.
type Query struct {
	Type   string // only this lock type; "" for every type
	Prefix string // only keys starting with it; "" for every key
	// AfterType and AfterKey are the last lock of the previous page: the
	// page starts right after it. Both empty for the first page.
	AfterType string
	AfterKey  string
	Limit     int // at most this many locks; the reader may lower it
}

// Page sizes of a listing, for every reader and the admin API alike.
const (
	// MaxListLimit caps one page: the statemachine holds the table's read
	// lock while it builds the page, and apply waits for it.
	MaxListLimit = 1000
	// DefaultListLimit is the page size when a query names none.
	DefaultListLimit = 100
)

// Page is one page of a listing.
type Page struct {
	Locks []Lock
	// More reports that more locks match after the last one: ask again
	// with AfterType and AfterKey set to it.
	More bool
	// Applied is the Raft index the replica had applied when it read.
	Applied uint64
}

// Lock is one lock as read from the table: what Table.Lock and List, the
// replica's reads (Node.Lock, LockLinearizable, GetLock, ListLocks), the
// gateway's claim by read and the admin API all hand around. It is the
// only value type for a read lock; the table's own mutable state is
// statemachine's lockState, and the admin API's JSON is adminapi.Lock
// (gateway/admin/adminapi: it adds what the server derives at the read,
// such as client IP, node and time left).
type Lock struct {
	// Found is false for a free lock (nobody holds it, nobody waits):
	// then only Type, Key and Clock are set. Table.Lock and Node.Lock
	// return such values; the admin reads return ErrNotFound instead, and
	// every lock of a Page is found.
	Found  bool
	Type   string
	Key    string
	Owner  string
	ConnID string // connection of the holder's latest ACQUIRE, RENEW or claim
	Count  int32  // reentrant count
	Token  uint64 // fencing token of the current grant
	// AcquiredAtMs is the table clock when the current grant was made (a
	// first ACQUIRE or a hand-off to a waiter). 0 means unknown: granted
	// before nacos-lockd recorded it, or imported from Nacos.
	AcquiredAtMs int64
	LeaseEndMs   int64 // the lease is over once the clock is past it
	// Unclaimed marks a grant handed to a queued waiter that has not yet
	// confirmed it with an ACQUIRE.
	Unclaimed bool
	Waiters   []Waiter // in queue order
	// Clock is the table clock when the lock was read (found or not),
	// not part of the lock's state: a claim answered from a read takes
	// effect then.
	Clock int64
}

// Waiter is one queued waiter.
type Waiter struct {
	Owner      string
	ConnID     string
	DeadlineMs int64 // the waiter is dropped once the clock reaches it
}
