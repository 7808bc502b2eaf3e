package statemachine

import (
	"cmp"
	"slices"
	"sync"
	"unique"

	"github.com/google/btree"
)

// lockID identifies a lock: Nacos compares (lockType, key) as exact strings,
// so the same key under two types is two locks.
type lockID struct {
	kind Kind
	key  string
}

func compareIDs(a, b lockID) int {
	if c := cmp.Compare(a.kind, b.kind); c != 0 {
		return c
	}
	return cmp.Compare(a.key, b.key)
}

// lockState is one lock. owner == "" means free. A free lock never has
// queued waiters: whenever a lock becomes free, the same apply hands it to
// the first live waiter (see settle), so a free entry with no waiters is
// deleted and nobody can barge past a queue.
//
// It is the table's own mutable state, shared by pointer between its maps,
// and holds what only apply needs (the waiters' enqueue times and leases);
// readers get a copy as a lockview.Lock (Table.Lock), never a lockState.
type lockState struct {
	// key and kind are the lock's id (see id), set when the lock is made
	// and never changed: the ordered indexes hold the lock itself and
	// compare by them, which keeps an index entry one pointer.
	key      string
	owner    string
	connID   string // connection of the owner's latest ACQUIRE, RENEW or claim
	leaseEnd int64  // table clock (Unix ms) after which the lease is over
	token    uint64 // fencing token of the current grant
	// acquiredAt is the table clock when the current grant was made (the
	// same entry that minted token); 0 when unknown (a record written
	// before the field existed, or an imported lock). Informational: no
	// decision reads it.
	acquiredAt int64
	// waitq is the FIFO queue (see queue), nil when nobody waits: most
	// locks never have waiters, and a pointer in place of a slice keeps a
	// lock in a smaller allocation size class (96 bytes, not 112).
	waitq *[]waiter
	count int32
	kind  Kind
	// unclaimed marks a grant made to a queued waiter that the waiter has
	// not yet confirmed with an ACQUIRE. Its claim returns count 1 and the
	// same token, and a CANCEL_WAIT gives it up.
	unclaimed bool
}

func (l *lockState) id() lockID { return lockID{l.kind, l.key} }

// queue is the lock's waiters, first in line first.
func (l *lockState) queue() []waiter {
	if l.waitq == nil {
		return nil
	}
	return *l.waitq
}

// setQueue replaces the waiters; an empty queue frees its slot.
func (l *lockState) setQueue(ws []waiter) {
	switch {
	case len(ws) == 0:
		l.waitq = nil
	case l.waitq == nil:
		l.waitq = &ws
	default:
		*l.waitq = ws
	}
}

func (l *lockState) held() bool { return l.owner != "" }

// leaseOver is the one rule for when a lease has ended: once the clock is
// past its end (see Time in DESIGN.md).
func (l *lockState) leaseOver(clock int64) bool { return clock > l.leaseEnd }

type waiter struct {
	owner    string
	connID   string
	enqueued int64 // table clock when queued (informational)
	deadline int64 // the waiter is dead once clock >= deadline
	leaseMs  int64 // lease to grant when the lock is handed over
}

// dead is the one rule for when a waiter has given up: its deadline has
// come.
func (w waiter) dead(clock int64) bool { return clock >= w.deadline }

// byLease orders the held locks by lease end, then id, for the reaper.
// A lock's leaseEnd changes only while it is out of the index (between
// unindex and index, see edit and done), so the order never shifts under
// the tree.
func byLease(a, b *lockState) bool {
	if a.leaseEnd != b.leaseEnd {
		return a.leaseEnd < b.leaseEnd
	}
	return compareIDs(a.id(), b.id()) < 0
}

func byID(a, b *lockState) bool { return compareIDs(a.id(), b.id()) < 0 }

// Table is the deterministic lock table. Apply must have it to itself;
// reads (Lookup and the query methods) may run beside each other, never
// beside apply. The dragonboat adapter serialises them so.
type Table struct {
	// The locks and their indexes hold the locks themselves: an entry
	// costs a pointer, not a copy of the id. The locks are one btree in
	// (kind, key) order, not a map beside an ordered index: a lookup costs
	// a few more compares, and a held lock about 75 bytes less (W3: a
	// million held locks).
	locks  *btree.BTreeG[*lockState]       // every lock, by id (byID): lookups, listings, snapshots
	conns  map[string]map[*lockState]int32 // connection -> locks that reference it (holder or waiter), with multiplicity
	leases *btree.BTreeG[*lockState]       // held locks by lease end (byLease), for the reaper
	// emptied lists connections whose conns entry emptied during the
	// command being applied; the command's end drops those still empty.
	// A command takes a lock out of the indexes and puts it back, so a
	// connection's only reference goes and comes back within one command
	// (every W2 hand-off, for every waiter of the lock): deleting and
	// remaking its map each time cost the apply an allocation per waiter.
	emptied []string
	// unref holds the connections an unindexed lock referenced (its
	// holder's, then its waiters'), not yet dropped from conns: index puts
	// the same lock back by the difference, so the connections that still
	// reference it cost a string compare, not two map updates each (a W2
	// hand-off moves one holder and one waiter; the other waiters stay).
	// unrefLock is that lock; nil when nothing is pending.
	unref     []string
	unrefLock *lockState
	// probe is the key apply looks locks up with (find): a lookup with a
	// fresh one would allocate it, as the btree's comparison escapes it.
	probe   lockState
	clock   int64  // max NowMs of all applied commands
	fence   uint64 // highest fencing token ever granted
	applied uint64 // index of the last applied entry
	// tokenBase is added to the index of a granting entry to make its
	// fencing token. It is 0 for a table that has only ever lived on one
	// Raft log; a table installed at the start of a new log (an import
	// from Nacos, a restore) gets the fence of what it was given, so
	// every later grant's token is above every token handed out before.
	tokenBase uint64
	// level is the cluster level (level.go): which encodings every
	// member reads. LevelBaseline until a level entry raises it.
	level      int
	levelDirty bool // level changed since the last WriteChanges
	held       int  // number of held locks
	queued     int  // number of queued waiters

	dirty map[lockID]struct{} // locks changed since takeDirty
	notes []Notification      // grants to waiters since takeNotifications
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{
		locks:  btree.NewG(32, byID),
		conns:  make(map[string]map[*lockState]int32),
		leases: btree.NewG(32, byLease),
		dirty:  make(map[lockID]struct{}),
		level:  LevelBaseline,
	}
}

// Applied is the index of the last applied entry.
func (t *Table) Applied() uint64 { return t.applied }

// Clock is the table clock: the largest NowMs applied so far.
func (t *Table) Clock() int64 { return t.clock }

// Fence is the highest fencing token ever granted.
func (t *Table) Fence() uint64 { return t.fence }

// TokenBase is added to a granting entry's index to make its token.
func (t *Table) TokenBase() uint64 { return t.tokenBase }

// token is the fencing token of a grant made by the entry at index.
func (t *Table) token(index uint64) uint64 { return t.tokenBase + index }

// ApplyEncoded decodes and applies one log entry. An entry that does not
// decode gets CodeMalformed, identically on every replica.
func (t *Table) ApplyEncoded(index uint64, data []byte) Result {
	if IsLevelEntry(data) {
		if o, _ := t.ApplyLevel(index, data); o == LevelMalformed || o == LevelUnreadable {
			return refused(CodeMalformed)
		}
		return Result{Code: CodeOK, WaitPosition: -1}
	}
	cmd, err := DecodeCommand(data)
	if err != nil {
		t.applied = index
		return refused(CodeMalformed)
	}
	return t.Apply(index, cmd)
}

// Apply applies one command committed at the given Raft index.
func (t *Table) Apply(index uint64, cmd Command) Result {
	res := t.apply(index, cmd)
	t.dropEmptied()
	return res
}

func (t *Table) apply(index uint64, cmd Command) Result {
	t.applied = index
	if !cmd.valid() {
		return refused(CodeMalformed)
	}
	t.clock = max(t.clock, cmd.NowMs)
	if s, _ := cmd.Op.spec(); s.storesCaller {
		cmd.Owner, cmd.ConnID = intern(cmd.Owner), intern(cmd.ConnID)
	}
	switch cmd.Op {
	case OpAcquire:
		return t.acquire(index, cmd)
	case OpRelease:
		return t.release(index, cmd)
	case OpRenew:
		return t.renew(index, cmd)
	case OpCancelWait:
		return t.cancelWait(index, cmd)
	case OpExpire:
		return t.expire(index, cmd)
	case OpCleanupConnection:
		return t.cleanup(index, cmd)
	case OpForceRelease:
		return t.forceRelease(index, cmd)
	case OpClaim:
		return t.claim(index, cmd)
	}
	return refused(CodeMalformed)
}

// intern returns the one shared copy of s. A client's owner and its
// connection id are stored with every lock it holds or waits for (and for
// Gen 1 clients they are the same string), so a million locks held by a
// few hundred clients would otherwise carry a million copies of each.
// The table keeps the strings, not unique's handles, so unique forgets a
// copy at the next GC and a later command makes a new one: one copy per
// client per GC cycle instead of one per lock (TestTableMemoryPerLock:
// 482 -> 419 bytes per held lock).
func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// leaseEnd adds a lease to the clock without overflowing.
func (t *Table) leaseEnd(ms int64) int64 {
	if ms > maxTime-t.clock {
		return maxTime
	}
	return t.clock + ms
}

const maxTime = int64(^uint64(0) >> 1)

// leaseFrom adds a lease to a start time without overflowing.
func leaseFrom(start, ms int64) int64 {
	if ms > maxTime-start {
		return maxTime
	}
	return start + ms
}

func (t *Table) acquire(index uint64, cmd Command) Result {
	id := lockID{cmd.Kind, cmd.Key}
	if cmd.MaxLocks > 0 && uint64(t.locks.Len()) >= cmd.MaxLocks && !t.has(id) {
		// The memory guard: no new entries, existing locks keep working.
		return refused(CodeTooManyLocks)
	}
	l := t.edit(id)
	defer t.done(id, l)
	t.settle(index, id, l)

	switch {
	case l.owner == cmd.Owner && l.unclaimed && !cmd.Retry && cmd.ConnID != l.connID && t.level >= LevelOwnerMoves:
		// A fresh ACQUIRE from the owner on another connection: a client
		// that reconnected and is re-entering a lock whose claim was just
		// answered from a read on the old connection (its CLAIM can still
		// be queued on the old node, behind this in the log), or one that
		// asks again after losing the answer that queued it. The answer
		// differs (a re-entry, or a refusal for NON_REENTRANT, against
		// the claim), so it waits until the grant is claimed or gone: the
		// gateway proposes it again. Claims come as retries (3.3 clients,
		// nacoslock) and still claim from any connection.
		return refused(CodeClaimPending)
	case l.owner == cmd.Owner && l.unclaimed:
		// The queued waiter confirms the grant it was notified about.
		return t.confirm(l, cmd)
	case l.owner == cmd.Owner && cmd.Kind == KindReentrant:
		// Re-entry is checked before the queue: the holder never waits on itself.
		l.count++
		l.connID = cmd.ConnID
		l.leaseEnd = t.leaseEnd(cmd.LeaseMs)
		return Result{Code: CodeOK, Count: l.count, WaitPosition: -1, Token: l.token}
	case l.owner == cmd.Owner:
		// NON_REENTRANT and NACOS_LOCK refuse re-entry. Queuing the holder
		// behind itself could only deadlock, so it is never queued.
		return refused(CodeHeld)
	case !l.held():
		// Free implies no live waiters (settle just handed it over otherwise).
		l.owner, l.connID, l.count = cmd.Owner, cmd.ConnID, 1
		l.leaseEnd = t.leaseEnd(cmd.LeaseMs)
		l.token = t.token(index)
		l.acquiredAt = t.clock
		t.fence = max(t.fence, l.token)
		l.removeWaiter(cmd.Owner)
		return Result{Code: CodeOK, Count: 1, WaitPosition: -1, Token: l.token}
	}
	if cmd.WaitMs <= 0 {
		return refused(CodeHeld)
	}
	if cmd.MaxWaiters > 0 && len(l.queue()) >= int(cmd.MaxWaiters) && !l.isQueued(cmd.Owner) {
		return refused(CodeTooManyWaiters)
	}
	pos := l.enqueue(waiter{
		owner:    cmd.Owner,
		connID:   cmd.ConnID,
		enqueued: t.clock,
		deadline: t.leaseEnd(cmd.WaitMs),
		leaseMs:  cmd.LeaseMs,
	})
	return Result{Code: CodeHeld, WaitPosition: int32(pos)}
}

// confirm makes an unclaimed grant the owner's for good: the claim (an
// ACQUIRE, or the CLAIM that records one answered from a read). The lease
// restarts now: this is when the client learns it holds the lock.
func (t *Table) confirm(l *lockState, cmd Command) Result {
	l.unclaimed = false
	l.connID = cmd.ConnID
	if cmd.LeaseAtNow {
		l.leaseEnd = leaseFrom(cmd.NowMs, cmd.LeaseMs)
	} else {
		l.leaseEnd = t.leaseEnd(cmd.LeaseMs)
	}
	l.removeWaiter(cmd.Owner)
	return Result{Code: CodeOK, Count: l.count, WaitPosition: -1, Token: l.token}
}

// claim records a claim answered from a read: the same change as the
// ACQUIRE that claims, but only for the very grant the read saw (owner,
// token, still unclaimed; from level 3 that grant claimed already is a
// success that changes nothing). Anything else, and it changes nothing but
// the settle every command on the lock does.
func (t *Table) claim(index uint64, cmd Command) Result {
	id := lockID{cmd.Kind, cmd.Key}
	l, ok := t.find(id)
	if !ok {
		return refused(CodeNotFound)
	}
	t.unindex(l)
	defer t.done(id, l)
	t.settle(index, id, l)
	if l.owner == cmd.Owner && l.token == cmd.Token && !l.unclaimed && t.level >= LevelOwnerMoves {
		// The grant the read saw, claimed since: only the owner's own
		// commands from another connection can have done that (on the
		// claim's connection they come after this record), a RENEW (see
		// renew) or a claim it sent again there. The claim answered from
		// the read is in effect already; the record changes nothing, and
		// the connection is not dropped for it.
		return Result{Code: CodeOK, Count: l.count, WaitPosition: -1, Token: l.token}
	}
	if l.owner != cmd.Owner || !l.unclaimed || l.token != cmd.Token {
		return refused(CodeNotFound)
	}
	return t.confirm(l, cmd)
}

func (t *Table) release(index uint64, cmd Command) Result {
	id := lockID{cmd.Kind, cmd.Key}
	l, ok := t.find(id)
	if !ok {
		return refused(CodeNotFound)
	}
	t.unindex(l)
	defer t.done(id, l)
	t.settle(index, id, l)
	switch {
	case !l.held():
		return refused(CodeNotFound)
	case l.owner != cmd.Owner:
		return refused(CodeNotOwner)
	}
	l.count--
	if l.unclaimed || l.count <= 0 {
		l.free()
		t.settle(index, id, l)
		return Result{Code: CodeOK, Count: 0, WaitPosition: -1}
	}
	return Result{Code: CodeOK, Count: l.count, WaitPosition: -1}
}

func (t *Table) renew(index uint64, cmd Command) Result {
	id := lockID{cmd.Kind, cmd.Key}
	l, ok := t.find(id)
	if !ok {
		return refused(CodeNotFound) // no zombie entry for a missing key
	}
	t.unindex(l)
	defer t.done(id, l)
	// A lease that is over stays over: settle frees it before the owner
	// check, so a late RENEW cannot resurrect it.
	t.settle(index, id, l)
	switch {
	case !l.held():
		return refused(CodeNotFound)
	case l.owner != cmd.Owner:
		return refused(CodeNotOwner)
	}
	if l.unclaimed && cmd.ConnID != l.connID && t.level >= LevelOwnerMoves {
		// The owner renews a grant it has not claimed, from another
		// connection: only a client told it holds the lock renews it, so
		// its claim was answered from a read on the grant's connection and
		// its CLAIM is not in the log yet (it is queued on that node; this
		// renew came through another). In the sequential history the claim
		// came first: the grant is claimed now, and the CLAIM changes
		// nothing when it comes (see claim). Left unclaimed and moved here,
		// the CLAIM bound it back to the old connection, whose cleanup
		// freed a lock its owner was renewing, and a re-entry here counted
		// it as the claim.
		l.unclaimed = false
		l.removeWaiter(cmd.Owner)
	}
	l.leaseEnd = t.leaseEnd(cmd.LeaseMs)
	l.connID = cmd.ConnID // a watchdog renewing after a reconnect moves the lock to its new connection
	return Result{Code: CodeOK, Count: l.count, WaitPosition: -1, Token: l.token}
}

func (t *Table) cancelWait(index uint64, cmd Command) Result {
	id := lockID{cmd.Kind, cmd.Key}
	l, ok := t.find(id)
	if !ok {
		return Result{Code: CodeOK, WaitPosition: -1}
	}
	t.unindex(l)
	defer t.done(id, l)
	t.settle(index, id, l)
	if l.owner == cmd.Owner && l.unclaimed && cmd.ConnID != l.connID && t.level >= LevelOwnerMoves {
		// As for a fresh ACQUIRE (see acquire): from another connection
		// this may follow a claim answered from a read whose CLAIM is not
		// in the log yet, and then it must keep the lock, not give it up.
		return refused(CodeClaimPending)
	}
	l.removeWaiter(cmd.Owner)
	if l.owner == cmd.Owner && l.unclaimed {
		// The waiter gave up just as the lock reached it: pass it on.
		l.free()
		t.settle(index, id, l)
	}
	return Result{Code: CodeOK, WaitPosition: -1}
}

func (t *Table) expire(index uint64, cmd Command) Result {
	id := lockID{cmd.Kind, cmd.Key}
	l, ok := t.find(id)
	if !ok {
		return refused(CodeNotExpired)
	}
	t.unindex(l)
	defer t.done(id, l)
	// Only the lease the reaper saw may be ended, and only once the table
	// clock is past it: a renew or a new grant committed first wins.
	due := l.held() && l.token == cmd.Token && l.leaseOver(t.clock)
	t.settle(index, id, l)
	if !due {
		return refused(CodeNotExpired)
	}
	return Result{Code: CodeOK, WaitPosition: -1}
}

func (t *Table) cleanup(index uint64, cmd Command) Result {
	refs := t.conns[cmd.ConnID]
	locks := make([]*lockState, 0, len(refs))
	for l := range refs {
		locks = append(locks, l)
	}
	slices.SortFunc(locks, func(a, b *lockState) int { return compareIDs(a.id(), b.id()) }) // map order must not reach state
	for _, l := range locks {
		id := l.id()
		t.unindex(l)
		l.setQueue(slices.DeleteFunc(l.queue(), func(w waiter) bool { return w.connID == cmd.ConnID }))
		if l.held() && l.connID == cmd.ConnID {
			l.free() // whatever the reentrant count: the connection is gone
		}
		t.settle(index, id, l)
		t.done(id, l)
	}
	return Result{Code: CodeOK, WaitPosition: -1}
}

// forceRelease is the operator's release (the admin API): whatever the
// owner and the reentrant count, the grant ends and the lock passes to the
// next live waiter exactly as on a final RELEASE. A non-zero Token limits
// it to that grant, so an operator who read the lock never frees a grant
// made after the read. The result carries the released grant's token.
func (t *Table) forceRelease(index uint64, cmd Command) Result {
	id := lockID{cmd.Kind, cmd.Key}
	l, ok := t.find(id)
	if !ok {
		return refused(CodeNotFound)
	}
	t.unindex(l)
	defer t.done(id, l)
	t.settle(index, id, l) // a lease already over is not force-released, it expired
	switch {
	case !l.held():
		return refused(CodeNotFound)
	case cmd.Token != 0 && l.token != cmd.Token:
		return refused(CodeNotOwner)
	}
	released := l.token
	l.free()
	t.settle(index, id, l)
	return Result{Code: CodeOK, WaitPosition: -1, Token: released}
}

// settle brings a lock up to the table clock: it drops waiters whose
// deadline passed, ends a lease that is over, and hands a free lock to the
// first live waiter. The hand-off is a grant like any other: a new fencing
// token (from this entry's index), a lease from the waiter's request, and a
// notification to the waiter's connection.
func (t *Table) settle(index uint64, id lockID, l *lockState) {
	l.setQueue(slices.DeleteFunc(l.queue(), func(w waiter) bool { return w.dead(t.clock) }))
	if l.held() && l.leaseOver(t.clock) {
		l.free()
	}
	if l.held() || len(l.queue()) == 0 {
		return
	}
	w := l.queue()[0]
	l.setQueue(slices.Delete(l.queue(), 0, 1))
	l.owner, l.connID, l.count = w.owner, w.connID, 1
	l.leaseEnd = t.leaseEnd(w.leaseMs)
	l.token = t.token(index)
	l.acquiredAt = t.clock
	l.unclaimed = true
	t.fence = max(t.fence, l.token)
	t.notes = append(t.notes, Notification{ConnID: w.connID, Owner: w.owner, Kind: id.kind, Key: id.key, Token: l.token})
}

func (l *lockState) free() {
	l.owner, l.connID, l.count, l.leaseEnd, l.acquiredAt, l.unclaimed = "", "", 0, 0, 0, false
}

func (l *lockState) isQueued(owner string) bool {
	return slices.ContainsFunc(l.queue(), func(w waiter) bool { return w.owner == owner })
}

func (l *lockState) removeWaiter(owner string) {
	l.setQueue(slices.DeleteFunc(l.queue(), func(w waiter) bool { return w.owner == owner }))
}

// enqueue adds w at the tail, or refreshes the owner's existing entry in
// place (new deadline, connection and lease) so retries never duplicate it.
// It returns the 0-based position.
func (l *lockState) enqueue(w waiter) int {
	for i := range l.queue() {
		if l.queue()[i].owner == w.owner {
			w.enqueued = l.queue()[i].enqueued
			l.queue()[i] = w
			return i
		}
	}
	l.setQueue(append(l.queue(), w))
	return len(l.queue()) - 1
}

// find looks a lock up for apply. It reuses the table's probe, so only
// apply may call it; readers, which may run beside each other, use lookup.
func (t *Table) find(id lockID) (*lockState, bool) {
	t.probe.kind, t.probe.key = id.kind, id.key
	l, ok := t.locks.Get(&t.probe)
	t.probe.key = "" // keep no key alive
	return l, ok
}

func (t *Table) has(id lockID) bool {
	_, ok := t.find(id)
	return ok
}

// readerProbes are the probes readers look locks up with: readers may run
// beside each other, so they cannot share the table's own probe, and a
// fresh one per read escapes (the btree compares through a function
// value), an allocation on every claim's read and release's hint.
var readerProbes = sync.Pool{New: func() any { return new(lockState) }}

// lookup looks a lock up for a reader.
func (t *Table) lookup(id lockID) (*lockState, bool) {
	p := readerProbes.Get().(*lockState)
	p.kind, p.key = id.kind, id.key
	l, ok := t.locks.Get(p)
	p.key = "" // keep no key alive
	readerProbes.Put(p)
	return l, ok
}

// edit returns the lock for id, creating it, and removes it from the
// derived indexes until done puts it back. The lock stays in locks: its
// place there never changes.
func (t *Table) edit(id lockID) *lockState {
	l, ok := t.find(id)
	if !ok {
		l = &lockState{kind: id.kind, key: id.key}
		t.locks.ReplaceOrInsert(l)
		return l
	}
	t.unindex(l)
	return l
}

// done re-indexes a lock after a change, deletes it when it is free with
// nobody waiting, and marks it for persistence.
func (t *Table) done(id lockID, l *lockState) {
	t.dirty[id] = struct{}{}
	if !l.held() && len(l.queue()) == 0 {
		t.flushUnref()
		t.locks.Delete(l)
		return
	}
	t.index(l)
}

// index and unindex add a lock to, and take it out of, the indexes that
// depend on its state: leases, the connection index and the counters.
// unindex leaves the lock's connection references pending (see unref);
// index, or done for a lock it deletes, settles them.
func (t *Table) index(l *lockState) {
	if l.held() {
		t.held++
		t.leases.ReplaceOrInsert(l)
	}
	t.queued += len(l.queue())
	if t.unrefLock != l {
		t.flushUnref()
		if l.held() {
			t.ref(l.connID, l, 1)
		}
		for _, w := range l.queue() {
			t.ref(w.connID, l, 1)
		}
		return
	}
	// The same lock back: match its connections now against those it had,
	// in order. The old list's front may have gone (a released holder, a
	// granted waiter) and the new one may have grown at the back (a new
	// waiter); whatever does not line up is dropped and added as before,
	// so any change stays correct and the usual ones cost nothing.
	old := t.unref
	n := len(l.queue())
	if l.held() {
		n++
	}
	conn := func(i int) string { // the new list: holder, then waiters
		if l.held() {
			if i == 0 {
				return l.connID
			}
			i--
		}
		return l.queue()[i].connID
	}
	start := len(old)
	if n > 0 {
		first := conn(0)
		for i, c := range old {
			if c == first {
				start = i
				break
			}
		}
	}
	i, j := start, 0
	for i < len(old) && j < n && old[i] == conn(j) {
		i++
		j++
	}
	for _, c := range old[:start] {
		t.ref(c, l, -1)
	}
	for _, c := range old[i:] {
		t.ref(c, l, -1)
	}
	for ; j < n; j++ {
		t.ref(conn(j), l, 1)
	}
	t.clearUnref()
}

func (t *Table) unindex(l *lockState) {
	t.flushUnref()
	if l.held() {
		t.held--
		t.leases.Delete(l)
		t.unref = append(t.unref, l.connID)
	}
	t.queued -= len(l.queue())
	for _, w := range l.queue() {
		t.unref = append(t.unref, w.connID)
	}
	t.unrefLock = l
}

// flushUnref drops the pending references of an unindexed lock that is
// not coming back as it was (deleted, or replaced by another object).
func (t *Table) flushUnref() {
	if t.unrefLock == nil {
		return
	}
	for _, c := range t.unref {
		t.ref(c, t.unrefLock, -1)
	}
	t.clearUnref()
}

func (t *Table) clearUnref() {
	clear(t.unref) // keep no connection id alive
	t.unref = t.unref[:0]
	t.unrefLock = nil
}

func (t *Table) ref(conn string, l *lockState, delta int32) {
	refs := t.conns[conn]
	if refs == nil {
		refs = make(map[*lockState]int32)
		t.conns[conn] = refs
	}
	if n := refs[l] + delta; n > 0 {
		refs[l] = n
		return
	}
	delete(refs, l)
	if len(refs) == 0 {
		t.emptied = append(t.emptied, conn)
	}
}

// dropEmptied removes the connections left without references by the
// command just applied (see emptied).
func (t *Table) dropEmptied() {
	// A lock unindexed and never put back leaves the index as an eager
	// unindex did: its references dropped. (Every command puts its lock
	// back; this keeps the deferred scheme equal to the eager one anyway.)
	t.flushUnref()
	for _, c := range t.emptied {
		if len(t.conns[c]) == 0 {
			delete(t.conns, c)
		}
	}
	clear(t.emptied)
	t.emptied = t.emptied[:0]
}

// takeDirty returns the locks changed since the last call, in key order.
func (t *Table) takeDirty() []lockID {
	ids := make([]lockID, 0, len(t.dirty))
	for id := range t.dirty {
		ids = append(ids, id)
	}
	clear(t.dirty)
	slices.SortFunc(ids, compareIDs)
	return ids
}

// Changed reports how many locks changed since the changes were last
// written or discarded.
func (t *Table) Changed() int { return len(t.dirty) }

// ChangeWriter receives a table's changes as key/value writes
// (storage.Batch is one).
type ChangeWriter interface {
	Set(key, val []byte)
	Delete(key []byte)
}

// WriteChanges writes every lock changed since the last call (or
// DiscardChanges), in key order, then the clock, the fence and the applied
// index, last (see storage.Batch.Commit), and forgets the changes.
func (t *Table) WriteChanges(w ChangeWriter) {
	for _, id := range t.takeDirty() {
		if l, ok := t.find(id); ok {
			w.Set(lockKey(id), encodeRecord(l))
		} else {
			w.Delete(lockKey(id))
		}
	}
	w.Set(keyClock, encodeUint(uint64(t.clock)))
	w.Set(keyFence, encodeUint(t.fence))
	if t.levelDirty {
		// Only once it rose: a store without the key is at the baseline,
		// and a build without the gate never sees the key before that.
		w.Set(keyLevel, encodeUint(uint64(t.level)))
		t.levelDirty = false
	}
	w.Set(keyApplied, encodeUint(t.applied))
}

// DiscardChanges forgets the changed locks of a table that is never
// written (an in-memory table).
func (t *Table) DiscardChanges() { clear(t.dirty) }

// TakeNotifications returns the grants to waiters since the last call, in
// the order they were made.
func (t *Table) TakeNotifications() []Notification {
	n := t.notes
	t.notes = nil
	return n
}

// storedLock is a decoded lock waiting to be installed by putAll.
type storedLock struct {
	id lockID
	l  *lockState
}

// putAll installs decoded locks (a restart's load, a snapshot) into a
// table that holds none yet. It sizes the maps once: growing them one
// insert at a time spent about a quarter of a million-lock load rehashing.
func (t *Table) putAll(locks []storedLock) {
	perConn := make(map[string]int)
	for _, s := range locks {
		if s.l.held() {
			perConn[s.l.connID]++
		}
		for _, w := range s.l.queue() {
			perConn[w.connID]++
		}
	}
	for c, n := range perConn {
		if t.conns[c] == nil {
			t.conns[c] = make(map[*lockState]int32, n)
		}
	}
	for _, s := range locks {
		t.put(s.id, s.l)
	}
}

// put installs a decoded lock (loading from storage or a snapshot).
func (t *Table) put(id lockID, l *lockState) {
	if old, ok := t.find(id); ok {
		t.unindex(old)
	}
	l.kind, l.key = id.kind, id.key
	t.locks.ReplaceOrInsert(l) // replaces old, which has the same id
	t.index(l)
	t.dropEmptied()
}
