package nacoslock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"nacos-lockd/protocol"
)

// Kind is the lock type on the wire. The same key under two kinds is two
// independent locks, so a Go program sharing a lock with Java programs
// must use the kind they use.
type Kind int

const (
	// NonReentrant is NON_REENTRANT (Nacos 3.3 getNonReentrantLock): a
	// Mutex that holds the lock cannot take it again.
	NonReentrant Kind = iota
	// Reentrant is REENTRANT (Nacos 3.3 getReentrantLock): the holder may
	// take it again, the server counts the holds, and it is free after as
	// many Unlocks.
	Reentrant
	// Legacy is NACOS_LOCK, the type of the Nacos 3.0-3.2 LockService
	// (NLockFactory.getLock): not reentrant, like NonReentrant.
	Legacy
)

func (k Kind) String() string {
	switch k {
	case Reentrant:
		return protocol.LockTypeReentrant
	case Legacy:
		return protocol.LockTypeNacos
	}
	return protocol.LockTypeNonReentrant
}

// Errors of Mutex calls; match them with errors.Is.
var (
	// ErrLocked is TryLock's answer when another owner holds the lock.
	ErrLocked = errors.New("nacoslock: lock is held by another owner")
	// ErrNotHeld is Unlock's answer when this Mutex does not hold the
	// lock (never locked, unlocked, or lost).
	ErrNotHeld = errors.New("nacoslock: lock not held")
	// ErrReentry is the answer of Lock and TryLock on a non-reentrant
	// Mutex that already holds the lock: waiting for itself could only
	// deadlock (the Java SDK refuses it locally too).
	ErrReentry = errors.New("nacoslock: non-reentrant lock already held by this Mutex")
	// ErrLost is wrapped by Err after a hold was lost: a renewal was
	// refused, or none got through before the lease ended.
	ErrLost = errors.New("nacoslock: lock lost")
)

const (
	defaultLease = 30 * time.Second
	// queueWait is how long one ACQUIRE asks the server to keep us queued;
	// a Lock without a deadline refreshes its entry well before that, by
	// sending ACQUIRE again (which keeps its place).
	queueWait = 60 * time.Second
	// pollInterval is how often a queued Lock asks again without a push:
	// a safety net only, as the push is what wakes it.
	pollInterval = 5 * time.Second
	// attempts bounds the tries of TryLock and Unlock, whose callers
	// expect an answer rather than a wait (Java: 4 tries).
	attempts = 4
)

// MutexOption configures a Mutex.
type MutexOption func(*Mutex)

// WithKind sets the lock type; the default is NonReentrant.
func WithKind(k Kind) MutexOption { return func(m *Mutex) { m.kind = k } }

// WithLease sets the lease the server grants (default 30 s; the server
// caps it at its nacos.lock.max_expire_time). The watchdog renews every
// third of it while the lock is held.
func WithLease(d time.Duration) MutexOption {
	return func(m *Mutex) {
		if d >= time.Millisecond {
			m.lease = d
		}
	}
}

// WithOwner sets the owner string the server records (default: unique per
// Mutex). Two Mutexes with the same owner, kind and key are the same
// holder to the server; use it only to take over a hold across processes
// (nacos-lockctl unlock --owner).
func WithOwner(owner string) MutexOption { return func(m *Mutex) { m.owner = owner } }

// Mutex is one owner's handle on one lock (kind, key). Its owner is unique
// to it, so two Mutexes exclude each other even in one process and one
// Client. Lock, TryLock and Unlock of one Mutex are serialised;
// FencingToken, Lease, Lost and Err may be called at any time.
type Mutex struct {
	cl    *Client
	key   string
	kind  Kind
	lease time.Duration
	owner string

	op sync.Mutex // one Lock, TryLock or Unlock at a time

	mu    sync.Mutex
	count int   // holds, as the server counted them
	h     *hold // the current hold, nil when not held
	err   error // why the last hold ended
}

// hold is one tenure of the lock: from the grant to the last Unlock or
// the loss. Its watchdog renews it.
type hold struct {
	m      *Mutex
	token  uint64
	lost   chan struct{} // closed when the hold ends
	kick   chan struct{} // renew now (after a reconnect)
	stop   chan struct{} // closed by end; the watchdog exits
	wdDone chan struct{}
	once   sync.Once
	// releasing is set while Unlock sends the last RELEASE: a renewal
	// refused then is that release, not a loss.
	releasing atomic.Bool
}

var closedCh = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// Mutex returns a handle on the lock key. Creating one sends nothing.
func (cl *Client) Mutex(key string, opts ...MutexOption) *Mutex {
	m := &Mutex{cl: cl, key: key, kind: NonReentrant, lease: defaultLease}
	for _, f := range opts {
		f(m)
	}
	if m.owner == "" {
		// Java's NacosLock owner is <client id>:<thread id>; ours names
		// the client and the Mutex, which is what holds here.
		m.owner = cl.o.name + ":" + cl.id + ":" + strconv.FormatUint(cl.mutexes.Add(1), 10)
	}
	m.err = ErrNotHeld
	return m
}

// Key is the lock's key; Owner the owner string this Mutex sends.
func (m *Mutex) Key() string { return m.key }

// Owner is the owner string this Mutex sends.
func (m *Mutex) Owner() string { return m.owner }

// Lease is the lease this Mutex asks for.
func (m *Mutex) Lease() time.Duration { return m.lease }

// FencingToken is the token of the current hold, 0 when not held. Tokens
// only grow: every grant of a lock has a higher token than every earlier
// grant of it, across restarts and leader changes. Pass it to the
// resource the lock protects and let the resource refuse a token lower
// than one it has seen, so that a holder that lost the lock without
// noticing (a pause longer than the lease) cannot overwrite the next
// holder's work.
func (m *Mutex) FencingToken() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == nil {
		return 0
	}
	return m.h.token
}

// Held reports whether this Mutex holds the lock, as far as it knows, and
// how many times (1 unless Reentrant).
func (m *Mutex) Held() (bool, int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.h != nil, m.count
}

// Lost is closed when the current hold ends: the lock was lost (a renewal
// was refused, none got through within the lease, or the Client was
// closed), or the last Unlock released it. Stop the work the lock protects
// when it closes. When the Mutex does not hold the lock it returns a
// closed channel. Err says why.
func (m *Mutex) Lost() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h == nil {
		return closedCh
	}
	return m.h.lost
}

// Err is nil while the lock is held; afterwards ErrNotHeld (never held,
// or unlocked), an error wrapping ErrLost, or ErrClosed.
func (m *Mutex) Err() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h != nil {
		return nil
	}
	return m.err
}

func (m *Mutex) instance() protocol.LockInstance {
	key, typ := m.key, m.kind.String()
	return protocol.LockInstance{Key: &key, LockType: &typ, Owner: m.owner}
}

func ms(d time.Duration) *int64 {
	v := max(d.Milliseconds(), 1)
	return &v
}

// TryLock takes the lock if it is free and returns ErrLocked if another
// owner holds it; it never queues. A reentrant Mutex that holds the lock
// takes it once more.
func (m *Mutex) TryLock(ctx context.Context) error {
	m.op.Lock()
	defer m.op.Unlock()
	if err := m.checkReentry(); err != nil {
		return err
	}
	if held, _ := m.Held(); held {
		return m.reenter(ctx)
	}
	noWait := int64(-1)
	var last error
	for try := 0; try < attempts; try++ {
		li := m.instance()
		li.ExpiredTime, li.WaitTimeMs = ms(m.lease), &noWait
		sent := time.Now()
		r, out, err := m.cl.lockCall(ctx, protocol.OpAcquire, li)
		if err != nil {
			last = err
			if out == uncertain {
				m.undoUncertain(ctx)
			}
			if ctx.Err() != nil || out == applied || !retryable(err) {
				return err
			}
			if !sleepCtx(ctx, backoff(try)) {
				return last
			}
			continue
		}
		lr := result(r)
		if lr.Success {
			m.granted(lr, sent)
			return nil
		}
		return fmt.Errorf("%w: %s", ErrLocked, lr.ErrorMessage)
	}
	return last
}

// Lock takes the lock, waiting in the server's FIFO queue while another
// owner holds it; the server pushes the grant to the waiter at the head
// when the lock is freed. When ctx ends first, Lock leaves the queue
// (CANCEL_WAIT) and returns ctx's error. Lock retries through server
// failures and reconnects until ctx ends. Once held, a watchdog renews the
// lease every third of it until Unlock; watch Lost. A Reentrant Mutex
// that holds the lock takes it once more at once; a non-reentrant one
// returns ErrReentry.
func (m *Mutex) Lock(ctx context.Context) error {
	m.op.Lock()
	defer m.op.Unlock()
	if err := m.checkReentry(); err != nil {
		return err
	}
	if held, _ := m.Held(); held {
		return m.reenter(ctx)
	}
	wake := make(chan struct{}, 1)
	pk := pushKey{m.kind.String(), m.key, m.owner}
	m.cl.mu.Lock()
	m.cl.waits[pk] = wake
	m.cl.mu.Unlock()
	defer func() {
		m.cl.mu.Lock()
		delete(m.cl.waits, pk)
		m.cl.mu.Unlock()
	}()
	retry, queued, maybeHeld := false, false, false
	for try := 0; ; try++ {
		li := m.instance()
		wait := queueWait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		li.ExpiredTime, li.WaitTimeMs, li.WaiterRetry = ms(m.lease), ms(wait), retry
		sent := time.Now()
		r, out, err := m.cl.lockCall(ctx, protocol.OpAcquire, li)
		if err != nil {
			if out == uncertain {
				maybeHeld = true
			}
			if ctx.Err() != nil {
				m.leaveQueue(queued, maybeHeld)
				return fmt.Errorf("nacoslock: lock %q: %w", m.key, ctx.Err())
			}
			if out == applied || !retryable(err) {
				m.leaveQueue(queued, maybeHeld)
				return err
			}
			if maybeHeld {
				// An ACQUIRE that may have granted the lock without our
				// knowing its token: give that grant back, then ask again.
				m.undoUncertain(ctx)
				maybeHeld = false
			}
			m.cl.o.log.Debug("lock attempt failed; retrying", "err", err)
			if !sleepCtx(ctx, backoff(try)) {
				m.leaveQueue(queued, false)
				return fmt.Errorf("nacoslock: lock %q: %w", m.key, ctx.Err())
			}
			continue
		}
		maybeHeld = false
		lr := result(r)
		if lr.Success {
			m.granted(lr, sent)
			return nil
		}
		if !lr.Waiting() {
			// Refused without queuing although we asked to wait: the
			// owner itself holds the lock, which only an earlier answer
			// we did not get can explain. Give it back and ask again.
			m.cl.o.log.Debug("acquire refused without queuing; releasing a grant we may hold", "msg", lr.ErrorMessage)
			m.undoUncertain(ctx)
			if !sleepCtx(ctx, backoff(try)) {
				m.leaveQueue(queued, false)
				return fmt.Errorf("nacoslock: lock %q: %w", m.key, ctx.Err())
			}
			retry = false
			continue
		}
		// Queued. Every later ACQUIRE is a retry, as the Java client
		// sends it: the server answers a retry for a pushed grant from a
		// read, without a Raft entry.
		queued, retry = true, true
		t := time.NewTimer(pollInterval)
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			m.leaveQueue(true, false)
			return fmt.Errorf("nacoslock: lock %q: %w", m.key, ctx.Err())
		}
		t.Stop()
	}
}

// checkReentry refuses a second hold of a non-reentrant lock locally, so
// nothing is sent.
func (m *Mutex) checkReentry() error {
	if held, _ := m.Held(); held && m.kind != Reentrant {
		return fmt.Errorf("nacoslock: lock %q: %w", m.key, ErrReentry)
	}
	return nil
}

// reenter takes a held reentrant lock once more. The server counts the
// holds; if a retry after an unknown outcome counted one twice, the extra
// hold is given back.
func (m *Mutex) reenter(ctx context.Context) error {
	_, count := m.Held()
	want := count + 1
	noWait := int64(-1)
	var last error
	for try := 0; try < attempts; try++ {
		li := m.instance()
		li.ExpiredTime, li.WaitTimeMs = ms(m.lease), &noWait
		r, out, err := m.cl.lockCall(ctx, protocol.OpAcquire, li)
		if err != nil {
			last = err
			if ctx.Err() != nil || out == applied || !retryable(err) {
				return err
			}
			if !sleepCtx(ctx, backoff(try)) {
				return last
			}
			continue
		}
		lr := result(r)
		if !lr.Success {
			// The server no longer has us as the holder: the hold is lost.
			m.lose(fmt.Errorf("%w: re-entry refused: %s", ErrLost, lr.ErrorMessage))
			return fmt.Errorf("nacoslock: lock %q: %w", m.key, ErrNotHeld)
		}
		for n := lr.ReentrantCount; n > want; n-- {
			li := m.instance()
			if _, _, err := m.cl.lockCall(ctx, protocol.OpRelease, li); err != nil {
				break
			}
		}
		m.mu.Lock()
		m.count = want
		m.mu.Unlock()
		return nil
	}
	return last
}

// granted records a new hold and starts its watchdog. The lease is
// counted from when the ACQUIRE was sent, which is never later than when
// the server started it.
func (m *Mutex) granted(lr protocol.LockResult, sent time.Time) {
	h := &hold{m: m, token: lr.FencingToken, lost: make(chan struct{}), kick: make(chan struct{}, 1),
		stop: make(chan struct{}), wdDone: make(chan struct{})}
	m.mu.Lock()
	m.h, m.count, m.err = h, max(lr.ReentrantCount, 1), nil
	m.mu.Unlock()
	m.cl.mu.Lock()
	closed := m.cl.closed
	if !closed {
		m.cl.holds[h] = struct{}{}
	}
	m.cl.mu.Unlock()
	go h.watchdog(sent)
	if closed {
		h.end(ErrClosed)
	}
}

// Unlock releases one hold: the lock is free (and handed to the next
// waiter) after the last. It returns an error wrapping ErrNotHeld when the
// Mutex does not hold the lock, or when the server says it no longer does
// (the hold was lost; Lost is then closed).
//
// A RELEASE whose answer is lost (a connection or leader failure) is sent
// again. For a lock held once that is harmless; for a Reentrant lock held
// several times the server may then count two releases, and the Mutex
// follows the server's count (Held), which can reach 0 and free the lock
// one Unlock early.
func (m *Mutex) Unlock(ctx context.Context) error {
	m.op.Lock()
	defer m.op.Unlock()
	m.mu.Lock()
	h, count := m.h, m.count
	cause := m.err
	m.mu.Unlock()
	if h == nil {
		if errors.Is(cause, ErrNotHeld) {
			return fmt.Errorf("nacoslock: unlock %q: %w", m.key, ErrNotHeld)
		}
		return fmt.Errorf("nacoslock: unlock %q: %w (%w)", m.key, ErrNotHeld, cause)
	}
	var last error
	unsure := false
	if count == 1 {
		h.releasing.Store(true)
		defer h.releasing.Store(false)
	}
	for try := 0; try < attempts; try++ {
		li := m.instance()
		zero := int64(0)
		li.ExpiredTime = &zero
		r, out, err := m.cl.lockCall(ctx, protocol.OpRelease, li)
		if err != nil {
			last = err
			unsure = unsure || out == uncertain
			if ctx.Err() != nil || out == applied || !retryable(err) {
				return err
			}
			if !sleepCtx(ctx, backoff(try)) {
				return last
			}
			continue
		}
		lr := result(r)
		switch {
		case lr.Success && lr.ReentrantCount > 0:
			m.mu.Lock()
			m.count = lr.ReentrantCount
			m.mu.Unlock()
			return nil
		case lr.Success:
			h.end(ErrNotHeld)
			return nil
		case unsure && count == 1:
			// An earlier attempt whose answer we lost did release it.
			h.end(ErrNotHeld)
			return nil
		default:
			h.end(fmt.Errorf("%w: release refused: %s", ErrLost, lr.ErrorMessage))
			return fmt.Errorf("nacoslock: unlock %q: %w: %s", m.key, ErrNotHeld, lr.ErrorMessage)
		}
	}
	return last
}

// leaveQueue is Lock's exit without the lock: CANCEL_WAIT takes our queue
// entry out, or passes on a grant pushed to us that we did not claim; a
// RELEASE gives back a grant an ACQUIRE with an unknown outcome may have
// made. The caller's ctx is over, so these get their own.
func (m *Mutex) leaveQueue(queued, maybeHeld bool) {
	ctx, cancel := context.WithTimeout(context.Background(), m.cl.o.requestTimeout)
	defer cancel()
	if maybeHeld {
		m.undoUncertain(ctx)
	}
	if !queued && !maybeHeld {
		return
	}
	if _, _, err := m.cl.lockCall(ctx, protocol.OpCancelWait, m.instance()); err != nil {
		// The entry ends at its wait deadline, an unclaimed grant at its
		// lease, or both when the connection closes.
		m.cl.o.log.Warn("cancel wait failed", "err", err)
	}
}

// undoUncertain releases a grant we may have been given by an ACQUIRE
// whose answer was lost. A refusal means there was none.
func (m *Mutex) undoUncertain(ctx context.Context) {
	li := m.instance()
	zero := int64(0)
	li.ExpiredTime = &zero
	for try := 0; try < attempts; try++ {
		r, out, err := m.cl.lockCall(ctx, protocol.OpRelease, li)
		if err == nil {
			if !result(r).Success {
				return
			}
			continue // a reentrant double count: release until refused
		}
		if out == applied || ctx.Err() != nil || !sleepCtx(ctx, backoff(try)) {
			return
		}
	}
}

// lose ends the current hold as lost.
func (m *Mutex) lose(err error) {
	m.mu.Lock()
	h := m.h
	m.mu.Unlock()
	if h != nil {
		h.end(err)
	}
}

// end finishes the hold once: the watchdog stops, Lost closes, the Mutex
// forgets it.
func (h *hold) end(err error) {
	h.once.Do(func() {
		m := h.m
		m.mu.Lock()
		if m.h == h {
			m.h, m.count, m.err = nil, 0, err
		}
		m.mu.Unlock()
		m.cl.mu.Lock()
		delete(m.cl.holds, h)
		m.cl.mu.Unlock()
		close(h.stop)
		if errors.Is(err, ErrLost) {
			m.cl.o.log.Warn("lock lost", "type", m.kind.String(), "err", err)
		}
		close(h.lost)
	})
}

// watchdog renews the hold every third of the lease, and at once after a
// reconnect. A renewal the server refuses means the lock is gone; when no
// renewal gets through before the lease (counted from the last one sent
// that succeeded) ends, the server will have let it go, so the hold is
// lost then too.
func (h *hold) watchdog(since time.Time) {
	defer close(h.wdDone)
	m := h.m
	every := max(m.lease/3, time.Millisecond)
	deadline := since.Add(m.lease)
	next := time.NewTimer(every)
	defer next.Stop()
	expire := time.NewTimer(time.Until(deadline))
	defer expire.Stop()
	for {
		select {
		case <-h.stop:
			return
		case <-expire.C:
			h.end(fmt.Errorf("%w: no renewal got through within the %v lease", ErrLost, m.lease))
			return
		case <-h.kick:
		case <-next.C:
		}
		sent := time.Now()
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		go func() {
			select {
			case <-h.stop:
				cancel()
			case <-ctx.Done():
			}
		}()
		li := m.instance()
		li.ExpiredTime = ms(m.lease)
		r, _, err := m.cl.lockCall(ctx, protocol.OpRenew, li)
		cancel()
		switch {
		case err == nil && r.Result:
			deadline = sent.Add(m.lease)
			expire.Reset(time.Until(deadline))
			next.Reset(every)
		case err == nil && h.releasing.Load():
			return // Unlock freed it and ends the hold
		case err == nil:
			h.end(fmt.Errorf("%w: renewal refused by the server", ErrLost))
			return
		default:
			m.cl.o.log.Debug("renewal failed; retrying", "err", err)
			next.Reset(min(every, 200*time.Millisecond))
		}
	}
}

// result is the 3.3 lockResult, or the 3.0 boolean when it is missing.
func result(r *protocol.LockOperationResponse) protocol.LockResult {
	if r.LockResult != nil {
		return *r.LockResult
	}
	return protocol.LockResult{Success: r.Result, WaitPosition: protocol.NoWaitPosition}
}

// retryable: transport failures, writes not committed in time and
// server limits may pass; a refused or invalid request will not.
func retryable(err error) bool {
	var se *ServerError
	if errors.As(err, &se) {
		return se.writeFailure() || se.ErrorCode == protocol.CodeOverThreshold || se.ErrorCode == protocol.CodeUnregister
	}
	return !errors.Is(err, ErrClosed)
}

func backoff(try int) time.Duration {
	return min(time.Duration(try+1)*100*time.Millisecond, time.Second)
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
