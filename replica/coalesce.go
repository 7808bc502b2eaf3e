package replica

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"

	"nacos-lockd/settings"

	"nacos-lockd/statemachine"
)

// DefaultCoalesceWindow is how long renews that come in quick succession
// wait for company before they are proposed. Renews are not
// latency-critical (the Java watchdog renews a third of a lease ahead),
// and a few milliseconds turn hundreds of spread-out renews per second
// into a few entries. A renew after a quiet spell (none within the
// window) does not wait, and no other command ever waits for the window.
// The --coalesce-window flag's declaration holds it.
const DefaultCoalesceWindow = settings.DefaultCoalesceWindow

// groupInFlight bounds the entries proposed and not yet applied. A
// single node fsyncs once per Raft step, so every entry in flight at once
// costs a sync of its own: one entry at a time, carrying everything that
// queued while the previous one committed, is what makes the log cheap
// under load (W1 c=16: 1.23x pairs/s and 0.88x CPU per pair against two
// at a time). The second slot is only for a command whose lock is in the
// entry in flight: it could not have joined that entry, and it is usually
// the next link of a hand-off (the claim record, then the new holder's
// release), where waiting a whole entry would double the hand-off time
// (W2 c=16 lost a third of its grants with one slot for everything).
const groupInFlight = 2

// waitMinLeaseMs is the shortest lease whose renew or claim record may
// wait out the window; below it they are proposed at once, as any other
// command, because a short lease must not spend its margin in the queue.
// A watchdog renews a third of the lease ahead. The gateway answers a
// claim only with at least half the lease left, and the record must apply
// before that half runs out (see DESIGN.md, "A claim in no entry of its
// own").
const waitMinLeaseMs = 1000

// syncHandOffMinCommands is the smallest entry whose sync hands the
// syncing thread's P to other goroutines (walfile.FS.Busy). An entry
// that gathered this many commands means as many callers in flight, whose
// next requests arrive during the sync and can be read and answered then;
// for a lone command the hand-off only adds a thread switch. A hand-off's
// entries (release, the previous holder's blocking acquire, the claim's
// record) carry at most four: they hand off for their claim instead
// (lastEntryHandsOff). Measured against
// never handing off (ab, server pinned, 6-12 rounds each): W1 c=64
// 1.08-1.09x pairs/s at 0.95-1.01x CPU per pair, W1 c=16 1.06x at 1.01x;
// W1 c=1, W1 at 1500 pairs/s, W2 c=16 and c=64 level. Always handing off
// cost W2 c=16 and the fixed rate 8-9% more CPU (gateway/DESIGN.md); a
// threshold of 2 or 4 gained less at W1 c=64 (1.06-1.07x).
const syncHandOffMinCommands = 5

// lastEntryCommands is the number of commands in the entry proposed last
// by any node of this process: the log's file system, which reads it, is
// the process's (walfile.Install).
var lastEntryCommands atomic.Int32

// lastEntryHandsOff is whether the entry proposed last by any node of
// this process carries a RELEASE that hands its lock to a waiter. The
// gateway pushed AVAILABLE to that waiter before proposing (gateway/
// DESIGN.md, "Pushed ahead of the commit"), so its claim arrives while the
// entry syncs. With the P kept through the sync, the claim was read only
// after the apply and the other answers, and its ReadIndex then waited
// for the step worker's next sync; with the P handed off it is read during
// the sync and waits for the grant, and a sole voter answers it from the
// local replica (Node.LockLinearizable) as soon as the grant is applied.
var lastEntryHandsOff atomic.Bool

// logBusy is the log's walfile.FS.Busy: whether the entry being synced,
// as far as this process knows, is large enough to hand the P off, or
// hands a lock to a waiter whose claim is on its way.
func logBusy() bool {
	return lastEntryCommands.Load() >= syncHandOffMinCommands || lastEntryHandsOff.Load()
}

// hintSync tells logBusy about the entry written next: how many commands
// it carries and whether one of them hands a lock to a waiter. Raft's
// group commit calls it as it proposes, the single-node engine as it
// writes.
func hintSync(commands int, grants bool) {
	lastEntryCommands.Store(int32(commands))
	lastEntryHandsOff.Store(grants)
}

// groupCommit is the node's one way into Raft when batching is on (see
// batch.go for the entry format). Commands are proposed in the order they
// arrive (an entry that dragonboat drops is proposed again, after entries
// proposed meanwhile): a command that finds a free slot and nothing queued
// ahead of it is proposed at once, on its caller's goroutine; the rest
// queue and leave together as one entry when a slot frees.
type groupCommit struct {
	n      *Node
	window time.Duration

	mu        sync.Mutex
	queue     []*pendingCmd
	flying    []*submitted // in flight, in proposal order
	following bool         // a queued command's lock is in an entry in flight
	closed    bool
	flush     *time.Timer // armed while queued renews wait out the window, or a busy shard its backoff
	flushAt   time.Time
	lastRenew time.Time     // arrival of the latest renew
	backoff   time.Duration // after dragonboat refused or dropped a proposal
	entries   sync.WaitGroup
}

type pendingCmd struct {
	cmd      statemachine.Command
	deadline time.Time
	start    time.Time
	out      chan outcome // buffered: a result never blocks on a caller that left
	// recorded, for a command queued by record, takes its outcome instead
	// of out, as Node.Record reports it (buffered): no goroutine stands
	// between the entry's result and the recorder. Its caller relies on it
	// being committed before anything proposed after it, or not at all.
	recorded chan error
	// mayWait: nobody hurries for it, so it may wait out the window for
	// company (see enqueue).
	mayWait bool
	// grants: a RELEASE that the local replica, when it was queued, would
	// hand to a waiter (NextGrant's hint), read before the queue's lock is
	// taken, as enqueue's hand-off hint for acquires is.
	grants bool
}

type outcome struct {
	res statemachine.Result
	err error
}

func newGroupCommit(n *Node, window time.Duration) *groupCommit {
	return &groupCommit{n: n, window: window}
}

var errClosing = fmt.Errorf("%w: node closing", ErrUnavailable)

// propose queues cmd and waits for its result. A command still queued when
// its ctx ends was never proposed; one proposed whose ctx ends first is
// ambiguous, exactly like a timed-out direct proposal.
func (g *groupCommit) propose(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	p, err := g.enqueue(deadline, cmd, nil)
	if err != nil {
		return statemachine.Result{}, err
	}
	return p.wait(ctx)
}

// wait returns p's outcome, or the ctx's error if that ends first. An
// outcome that is there when the ctx ends wins, so that a command that
// committed is never answered as one that did not: enqueue may have
// waited for p's entry on this goroutine up to the deadline (dragonboat
// ends an entry's wait on its own ticks), and a process that was stalled
// (paused, starved of CPU) wakes to a result and a passed deadline at
// once, where a select between two ready cases picks either.
func (p *pendingCmd) wait(ctx context.Context) (statemachine.Result, error) {
	select {
	case o := <-p.out:
		return o.res, o.err
	case <-ctx.Done():
		select {
		case o := <-p.out:
			return o.res, o.err
		default:
		}
		return statemachine.Result{}, fmt.Errorf("propose %s: %w: %w", p.cmd.Op, ErrUnavailable, ctx.Err())
	}
}

// enqueue puts cmd in line, to be proposed by deadline. When it can be
// proposed at once, it is, before enqueue returns; a caller that waits
// (recorded nil) then waits on this goroutine for the entry's result and
// hands it out (so a lone command costs no goroutine switch). With
// recorded it is recorded (see record).
func (g *groupCommit) enqueue(deadline time.Time, cmd statemachine.Command, recorded chan error) (*pendingCmd, error) {
	now := time.Now()
	wait := recorded == nil
	p := &pendingCmd{cmd: cmd, deadline: deadline, start: now, recorded: recorded}
	if wait {
		p.out = make(chan outcome, 1)
	}
	handOff := cmd.Op == statemachine.OpAcquire && cmd.WaitMs > 0 && g.window > 0 && g.n != nil && g.n.inHandOff(cmd)
	p.grants = cmd.Op == statemachine.OpRelease && g.n != nil && g.n.NextGrant(cmd.Kind, cmd.Key, cmd.Owner).Found
	g.mu.Lock()
	if g.closed {
		g.mu.Unlock()
		return nil, fmt.Errorf("propose %s: %w", cmd.Op, errClosing)
	}
	g.queue = append(g.queue, p)
	if !g.following && g.inFlightHas(cmd) {
		g.following = true
	}
	switch {
	case cmd.Op == statemachine.OpRenew:
		quiet := now.Sub(g.lastRenew) > g.window
		g.lastRenew = now
		p.mayWait = cmd.LeaseMs >= waitMinLeaseMs
		if !quiet && g.canWait() && len(g.queue) < statemachine.MaxBatch { // canWait: p too
			// Renews in quick succession: wait out the window for more.
			g.armFlush(g.queue[0].start.Add(g.window))
			g.mu.Unlock()
			return p, nil
		}
	case cmd.Op == statemachine.OpClaim && g.window > 0 && cmd.LeaseMs >= waitMinLeaseMs,
		cmd.Op == statemachine.OpAcquire && cmd.WaitMs > 0 && g.window > 0 && (handOff || g.claimQueued(cmd)):
		// A claim's record: its caller already has its answer, and the
		// next command for the lock (the new holder's release) usually
		// follows within a round trip. Waiting for it lets them share an
		// entry, where proposing now would cost a hand-off an entry of its
		// own. A blocking acquire for a lock in hand-off (granted to
		// someone else and not yet claimed, or with the claim's record
		// queued) is usually the previous holder queueing again: its
		// answer is a place in the queue, and it rides along too.
		p.mayWait = true
		if g.canWait() && len(g.queue) < statemachine.MaxBatch {
			g.armFlush(g.queue[0].start.Add(g.window))
			g.mu.Unlock()
			return p, nil
		}
	}
	sub := g.next(now)
	g.mu.Unlock()
	switch {
	case sub == nil:
	case !wait || sub.deadline.After(p.deadline):
		go g.await(sub) // others in it may wait longer than this caller will
	default:
		g.await(sub)
	}
	return p, nil
}

// record queues cmd behind everything queued before it, to be proposed
// by deadline, and returns at once; the channel delivers nil once cmd is
// committed and applied with success, or why not (see Node.Record).
func (g *groupCommit) record(deadline time.Time, cmd statemachine.Command) (<-chan error, error) {
	done := make(chan error, 1)
	if _, err := g.enqueue(deadline, cmd, done); err != nil {
		return nil, err
	}
	return done, nil
}

// deliver hands p its outcome: to its waiting caller, or, for a recorded
// command, as the error Node.Record promises. It never blocks: both
// channels hold one value and get one.
func (p *pendingCmd) deliver(o outcome) {
	if p.recorded == nil {
		p.out <- o
		return
	}
	switch {
	case o.err != nil:
		p.recorded <- o.err
	case o.res.Code != statemachine.CodeOK:
		p.recorded <- fmt.Errorf("%s: %w: %s", p.cmd.Op, ErrRecordRefused, o.res.Code)
	default:
		p.recorded <- nil
	}
}

// holding reports whether everything queued is waiting out the window for
// company (mu held): a claim's record for the release that follows it, a
// previous holder queueing again. A slot freeing up is no reason to send
// them alone; the window's end or a command that cannot wait sends them.
// (A claim answered while its grant's entry was still completing went out
// alone, a whole entry for nothing, once that entry was done.)
func (g *groupCommit) holding(now time.Time) bool {
	return g.flush != nil && g.canWait() && now.Before(g.flushAt)
}

// canWait reports whether everything queued may wait out the window (mu
// held).
func (g *groupCommit) canWait() bool {
	for _, p := range g.queue {
		if !p.mayWait {
			return false
		}
	}
	return true
}

// inHandOff reports whether the local replica shows cmd's lock granted to
// another owner who has not claimed it yet: a hand-off under way. It is a
// hint for when to propose, never a rule of the table (a stale read only
// makes a command wait out the window or not).
func (n *Node) inHandOff(cmd statemachine.Command) bool {
	d := n.sm.Load()
	return d != nil && d.inHandOff(cmd.Kind, cmd.Key, cmd.Owner)
}

// NextGrant reports whom a RELEASE by owner would hand the lock to, as the
// local replica sees it now: a hint for the gateway's push ahead of the
// commit (statemachine.Table.NextGrant), never a rule of the table.
func (n *Node) NextGrant(kind statemachine.Kind, key, owner string) statemachine.NextGrant {
	d := n.sm.Load()
	if d == nil {
		return statemachine.NextGrant{}
	}
	return d.nextGrant(kind, key, owner)
}

// claimQueued reports whether a claim's record for cmd's lock is queued
// (mu held).
func (g *groupCommit) claimQueued(cmd statemachine.Command) bool {
	for _, p := range g.queue {
		if p.cmd.Op == statemachine.OpClaim && statemachine.SameLock(p.cmd, cmd) {
			return true
		}
	}
	return false
}

// armFlush makes sure the queue is looked at again by at (mu held).
func (g *groupCommit) armFlush(at time.Time) {
	if g.flush != nil && !g.flushAt.After(at) {
		return
	}
	if g.flush != nil {
		g.flush.Stop()
	}
	g.flushAt = at
	g.flush = time.AfterFunc(time.Until(at), g.onFlush)
}

func (g *groupCommit) onFlush() {
	g.mu.Lock()
	g.flush = nil
	sub := g.next(time.Now())
	g.mu.Unlock()
	if sub != nil {
		g.await(sub)
	}
}

// submitted is one proposed entry and the callers it answers.
type submitted struct {
	rs       *dragonboat.RequestState // under Raft
	solo     <-chan soloResult        // under the sole-voter engine
	batch    []*pendingCmd
	deadline time.Time // the latest of its callers'
}

// next proposes the next entry from the front of the queue if a slot is
// free (mu held). Commands whose deadline passed while queued were never
// proposed: they fail here.
func (g *groupCommit) next(now time.Time) *submitted {
	for g.slotFree() && len(g.queue) > 0 && !g.closed {
		if g.flush != nil && g.backoff > 0 {
			return nil // dragonboat said busy: the timer retries
		}
		if g.holding(now) {
			return nil
		}
		batch := g.take(now)
		if len(batch) == 0 {
			continue // all it found had passed their deadlines
		}
		deadline := latestDeadline(batch)
		s, err := g.submit(batch, deadline, now)
		if err == nil {
			g.backoff = 0
			g.flying = append(g.flying, s)
			g.following = g.queueFollows()
			g.entries.Add(1)
			return s
		}
		if errors.Is(err, dragonboat.ErrShardNotReady) || errors.Is(err, dragonboat.ErrSystemBusy) {
			// Never appended, so safe to send again.
			g.retryLater(batch, now)
			return nil
		}
		failAll(batch, fmt.Errorf("%w: %w", ErrUnavailable, err))
	}
	return nil
}

// slotFree reports whether the next entry may be proposed now (mu held):
// when nothing is in flight, or, up to groupInFlight, when a queued
// command waits for a lock that an entry in flight holds (see
// groupInFlight).
func (g *groupCommit) slotFree() bool {
	return len(g.flying) == 0 || (len(g.flying) < groupInFlight && g.following)
}

// inFlightHas reports whether an entry in flight carries a command for
// cmd's lock (mu held).
func (g *groupCommit) inFlightHas(cmd statemachine.Command) bool {
	for _, s := range g.flying {
		if carries(s.batch, cmd) {
			return true
		}
	}
	return false
}

// queueFollows recomputes following after the entries in flight changed
// (mu held).
func (g *groupCommit) queueFollows() bool {
	if len(g.flying) == 0 {
		return false
	}
	for _, p := range g.queue {
		if g.inFlightHas(p.cmd) {
			return true
		}
	}
	return false
}

// retryLater puts a batch that never reached the log back at the front of
// the queue, in order, and looks again after a pause (mu held).
func (g *groupCommit) retryLater(batch []*pendingCmd, now time.Time) {
	g.queue = append(batch, g.queue...)
	g.backoff = min(max(2*g.backoff, 2*time.Millisecond), 100*time.Millisecond)
	g.armFlush(now.Add(g.backoff))
}

func latestDeadline(batch []*pendingCmd) time.Time {
	d := batch[0].deadline
	for _, p := range batch[1:] {
		if p.deadline.After(d) {
			d = p.deadline
		}
	}
	return d
}

// take removes the next entry's commands from the front of the queue (mu
// held), by statemachine's grouping rule (TakeEntry). Commands whose
// deadline passed while queued were never proposed: they fail here.
func (g *groupCommit) take(now time.Time) []*pendingCmd {
	entry, rest := statemachine.TakeEntry(g.queue, pendingCommand, func(p *pendingCmd) bool {
		if now.After(p.deadline) {
			p.deliver(outcome{err: fmt.Errorf("propose %s: %w: deadline passed in the queue", p.cmd.Op, ErrUnavailable)})
			return true
		}
		return false
	})
	g.queue = rest
	return entry
}

func pendingCommand(p *pendingCmd) *statemachine.Command { return &p.cmd }

// carries reports whether batch holds a command for cmd's lock.
func carries(batch []*pendingCmd, cmd statemachine.Command) bool {
	for _, p := range batch {
		if statemachine.SameLock(p.cmd, cmd) {
			return true
		}
	}
	return false
}

// submit proposes batch as one entry. Its timeout is the latest of its
// callers' deadlines: an earlier caller may give up, the others still
// want the answer.
func (g *groupCommit) submit(batch []*pendingCmd, deadline, now time.Time) (*submitted, error) {
	g.n.m.coalescedEntry(len(batch))
	grants := slices.ContainsFunc(batch, func(p *pendingCmd) bool { return p.grants })
	s := &submitted{batch: batch, deadline: deadline}
	entry := entryFor(batch)
	var err error
	if g.n.solo != nil {
		// The engine sets the log's hand-off hints itself, when it writes.
		s.solo, err = g.n.solo.submit(entry, len(batch), grants)
		return s, err
	}
	hintSync(len(batch), grants)
	s.rs, err = g.n.nh.Propose(g.n.session, entry, deadline.Sub(now))
	return s, err
}

// entryFor encodes batch as one log entry (EncodeEntry).
func entryFor(batch []*pendingCmd) []byte { return statemachine.EncodeEntry(batch, pendingCommand) }

// await waits for one entry, hands every caller its result, and proposes
// what queued meanwhile; that entry gets a goroutine of its own, so a
// caller is never kept waiting for someone else's entry.
func (g *groupCommit) await(s *submitted) {
	dropped := false
	if s.solo != nil {
		switch r := <-s.solo; {
		case r.err != nil:
			failAll(s.batch, r.err)
		default:
			g.deliverResults(s, r.data)
		}
	} else {
		r := <-s.rs.AppliedC()
		s.rs.Release()
		dropped = r.Dropped()
		if !dropped {
			g.finish(s, r)
		}
	}
	g.mu.Lock()
	g.flying = slices.DeleteFunc(g.flying, func(f *submitted) bool { return f == s })
	g.following = g.queueFollows()
	now := time.Now()
	switch {
	case dropped && g.closed:
		failAll(s.batch, errClosing)
	case dropped:
		// Dropped before it reached the log (no leader for a moment): it
		// was never appended, so it is proposed again, ahead of the rest
		// but behind the entries that may already have followed it. A
		// recorded command must not come after those (see Node.Record), so
		// it fails instead, and its caller deals with that.
		retry := s.batch[:0:0]
		for _, p := range s.batch {
			if p.recorded != nil {
				p.deliver(outcome{err: fmt.Errorf("propose %s: %w: dropped before it reached the log", p.cmd.Op, ErrUnavailable)})
				continue
			}
			retry = append(retry, p)
		}
		if len(retry) > 0 {
			g.retryLater(retry, now)
		}
	}
	nxt := g.next(now)
	g.mu.Unlock()
	g.entries.Done()
	if nxt != nil {
		go g.await(nxt)
	}
}

// finish hands out the results of an entry that was not dropped.
func (g *groupCommit) finish(s *submitted, r dragonboat.RequestResult) {
	switch {
	case r.Completed():
	default:
		failAll(s.batch, fmt.Errorf("%w: %w", ErrUnavailable, requestError(r)))
		return
	}
	g.deliverResults(s, r.GetResult().Data)
}

// deliverResults hands every caller of an applied entry its result.
func (g *groupCommit) deliverResults(s *submitted, data []byte) {
	if len(s.batch) == 1 {
		p := s.batch[0]
		res, err := statemachine.DecodeResult(data)
		if err != nil {
			err = fmt.Errorf("decode %s result: %w", p.cmd.Op, err)
		} else {
			g.n.m.proposed(p.cmd.Op, time.Since(p.start))
		}
		p.deliver(outcome{res, err})
		return
	}
	rs, err := statemachine.DecodeResults(data)
	if err == nil && len(rs) != len(s.batch) {
		err = fmt.Errorf("%d results for %d commands", len(rs), len(s.batch))
	}
	if err != nil {
		failAll(s.batch, fmt.Errorf("decode coalesced result: %w", err))
		return
	}
	for i, p := range s.batch {
		g.n.m.proposed(p.cmd.Op, time.Since(p.start))
		p.deliver(outcome{res: rs[i]})
	}
}

// requestError names why dragonboat did not complete a proposal, as its
// SyncPropose would.
func requestError(r dragonboat.RequestResult) error {
	switch {
	case r.Timeout():
		return dragonboat.ErrTimeout
	case r.Terminated():
		return dragonboat.ErrShardClosed
	case r.Rejected():
		return dragonboat.ErrRejected
	case r.Aborted():
		return dragonboat.ErrAborted
	}
	return errors.New("proposal not completed")
}

func failAll(batch []*pendingCmd, err error) {
	for _, p := range batch {
		p.deliver(outcome{err: fmt.Errorf("propose %s: %w", p.cmd.Op, err)})
	}
}

// close fails what is queued and returns once no entry is in flight. The
// node host must already be closed, so entries in flight end at once
// instead of at their deadlines.
func (g *groupCommit) close() {
	g.mu.Lock()
	g.closed = true
	if g.flush != nil {
		g.flush.Stop()
		g.flush = nil
	}
	queued := g.queue
	g.queue = nil
	g.mu.Unlock()
	failAll(queued, errClosing)
	g.entries.Wait()
}
