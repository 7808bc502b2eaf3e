package h2grpc

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// callLife is a call's cancellation and deadline, what its handler's
// context answers with (Done, Err, Deadline). A context.WithTimeout per
// call cost a timer, a registration with the connection's context and
// three allocations; here the call ends through the stream itself, the
// connection ends its live calls when it closes, and one timer per
// connection, set for the earliest deadline it has seen, ends the calls
// whose deadline has passed (a deadline is rarely reached: the timer
// mostly fires, finds nothing due and is set for the next one).
type callLife struct {
	deadline time.Time // zero: none

	mu   sync.Mutex
	done atomic.Value // chan struct{}, made on first use
	err  error        // set once, under mu
}

// closedChan is the Done of a call that ended before anyone asked.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (l *callLife) Done() <-chan struct{} {
	if d := l.done.Load(); d != nil {
		return d.(chan struct{})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	d := l.done.Load()
	if d == nil {
		d = make(chan struct{})
		l.done.Store(d)
	}
	return d.(chan struct{})
}

func (l *callLife) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *callLife) Deadline() (time.Time, bool) { return l.deadline, !l.deadline.IsZero() }

// end ends the call with err (context.Canceled or
// context.DeadlineExceeded); only the first end counts.
func (l *callLife) end(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	l.err = err
	if d := l.done.Load(); d != nil {
		close(d.(chan struct{}))
	} else {
		l.done.Store(closedChan)
	}
}

// watchDeadline has the connection end st when its deadline passes.
// Under c.mu, with st in c.streams.
func (c *conn) watchDeadlineLocked(st *stream, now time.Time) {
	d := st.life.deadline
	if d.IsZero() || (!c.reapAt.IsZero() && !d.Before(c.reapAt)) {
		return // the timer fires in time for it already
	}
	c.reapAt = d
	if c.reaper == nil {
		c.reaper = time.AfterFunc(d.Sub(now), c.reapDue)
	} else {
		c.reaper.Reset(d.Sub(now))
	}
}

// reapDue ends the calls whose deadline has passed and sets the timer
// for the earliest one left.
func (c *conn) reapDue() {
	now := time.Now()
	var due []*stream
	c.mu.Lock()
	var next time.Time
	for _, st := range c.streams {
		d := st.life.deadline
		switch {
		case d.IsZero():
		case !d.After(now):
			due = append(due, st)
		case next.IsZero() || d.Before(next):
			next = d
		}
	}
	c.reapAt = next
	if !next.IsZero() && !c.isClosed() {
		c.reaper.Reset(next.Sub(now))
	}
	c.mu.Unlock()
	for _, st := range due {
		st.life.end(context.DeadlineExceeded)
	}
}

// endLiveCalls ends the context of every call the connection still has,
// when it closes.
func (c *conn) endLiveCalls() {
	c.mu.Lock()
	live := make([]*stream, 0, len(c.streams))
	for _, st := range c.streams {
		live = append(live, st)
	}
	if c.reaper != nil {
		c.reaper.Stop()
	}
	c.mu.Unlock()
	for _, st := range live {
		st.life.end(context.Canceled)
	}
}
