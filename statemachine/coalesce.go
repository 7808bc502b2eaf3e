package statemachine

import (
	"context"
	"fmt"
	"time"
)

// DefaultCoalesceWindow is how long the node collects renews before
// proposing them as one entry. Renews are not latency-critical (the
// Java watchdog renews a third of a lease ahead), and a few milliseconds
// turn hundreds of spread-out renews per second into a few entries. A
// renew after a quiet spell (none within the window) does not wait.
const DefaultCoalesceWindow = 5 * time.Millisecond

// coalesceInFlight bounds the coalesced entries proposed and not yet
// applied; collection goes on while they commit.
const coalesceInFlight = 4

// coalescer collects renews (see batch.go) into entries.
type coalescer struct {
	n      *Node
	window time.Duration
	in     chan *pendingCmd // unbuffered: a full pipeline pushes back on callers
	slots  chan struct{}    // one per entry in flight
	stop   chan struct{}    // closed by close
	done   chan struct{}    // closed when run has returned
	carry  *pendingCmd      // a command for a lock the open batch already has
	// lastArrival is when collect last took a command (run's goroutine only).
	lastArrival time.Time
}

type pendingCmd struct {
	cmd      Command
	deadline time.Time
	start    time.Time
	out      chan outcome // buffered: commit never blocks on a caller that left
}

type outcome struct {
	res Result
	err error
}

func newCoalescer(n *Node, window time.Duration) *coalescer {
	c := &coalescer{n: n, window: window, in: make(chan *pendingCmd), slots: make(chan struct{}, coalesceInFlight),
		stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// propose hands cmd to the collector and waits for its result. A command
// that never reached the collector was not proposed; one that did and whose
// ctx ends first is ambiguous, exactly like a timed-out direct proposal.
func (c *coalescer) propose(ctx context.Context, cmd Command) (Result, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	p := &pendingCmd{cmd: cmd, deadline: deadline, start: time.Now(), out: make(chan outcome, 1)}
	select {
	case c.in <- p:
	case <-c.stop:
		return Result{}, fmt.Errorf("propose %s: %w: node closing", cmd.Op, ErrUnavailable)
	case <-ctx.Done():
		return Result{}, fmt.Errorf("propose %s: %w: %w", cmd.Op, ErrUnavailable, ctx.Err())
	}
	select {
	case o := <-p.out:
		return o.res, o.err
	case <-ctx.Done():
		return Result{}, fmt.Errorf("propose %s: %w: %w", cmd.Op, ErrUnavailable, ctx.Err())
	}
}

func (c *coalescer) run() {
	defer close(c.done)
	closing := func(batch []*pendingCmd) {
		if c.carry != nil {
			batch = append(batch, c.carry)
			c.carry = nil
		}
		failAll(batch, fmt.Errorf("%w: node closing", ErrUnavailable))
	}
	for {
		batch, ok := c.collect()
		if !ok {
			closing(batch)
			return
		}
		select {
		case c.slots <- struct{}{}:
		case <-c.stop:
			closing(batch)
			return
		}
		go func() {
			defer func() { <-c.slots }()
			c.commit(batch)
		}()
	}
}

// collect returns the next batch: the first command, then whatever
// arrives within the window, up to MaxBatch commands and one per lock.
// A command more than a window after the previous one does not wait:
// renews are rare then, and the window would only delay it; it goes with
// whatever is already waiting. ok is false when the node is closing;
// batch then holds what was taken.
func (c *coalescer) collect() (batch []*pendingCmd, ok bool) {
	first := c.carry
	c.carry = nil
	if first == nil {
		select {
		case first = <-c.in:
		case <-c.stop:
			return nil, false
		}
	}
	batch = append(make([]*pendingCmd, 0, 16), first)
	var window <-chan time.Time // nil: take only what is already waiting
	if time.Since(c.lastArrival) <= c.window {
		timer := time.NewTimer(c.window)
		defer timer.Stop()
		window = timer.C
	}
	c.lastArrival = time.Now()
	for len(batch) < MaxBatch {
		var p *pendingCmd
		if window == nil {
			select {
			case p = <-c.in:
			default:
				return batch, true
			}
		} else {
			select {
			case p = <-c.in:
			case <-window:
				return batch, true
			case <-c.stop:
				return batch, false
			}
		}
		c.lastArrival = time.Now()
		if hasLock(batch, p.cmd) {
			c.carry = p // next entry: one command per lock per entry
			return batch, true
		}
		batch = append(batch, p)
	}
	return batch, true
}

func hasLock(batch []*pendingCmd, cmd Command) bool {
	for _, p := range batch {
		if p.cmd.Kind == cmd.Kind && p.cmd.Key == cmd.Key {
			return true
		}
	}
	return false
}

// commit proposes one batch and hands every caller its result. The entry's
// deadline is the latest of its callers': an earlier caller may give up,
// the others still want the answer.
func (c *coalescer) commit(batch []*pendingCmd) {
	deadline := batch[0].deadline
	for _, p := range batch[1:] {
		if p.deadline.After(deadline) {
			deadline = p.deadline
		}
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	c.n.m.coalescedEntry(len(batch))
	if len(batch) == 1 { // the plain encoding: cheaper, and readable by every build
		p := batch[0]
		res, err := c.n.proposeOne(ctx, p.cmd, p.start)
		p.out <- outcome{res, err}
		return
	}
	cmds := make([][]byte, len(batch))
	for i, p := range batch {
		cmds[i] = p.cmd.Encode()
	}
	data, err := c.n.proposeEntry(ctx, encodeBatch(cmds))
	if err != nil {
		failAll(batch, err)
		return
	}
	rs, err := decodeResults(data)
	if err == nil && len(rs) != len(batch) {
		err = fmt.Errorf("%d results for %d commands", len(rs), len(batch))
	}
	if err != nil {
		failAll(batch, fmt.Errorf("decode coalesced result: %w", err))
		return
	}
	for i, p := range batch {
		c.n.m.proposed(p.cmd.Op, time.Since(p.start))
		p.out <- outcome{res: rs[i]}
	}
}

func failAll(batch []*pendingCmd, err error) {
	for _, p := range batch {
		p.out <- outcome{err: fmt.Errorf("propose %s: %w", p.cmd.Op, err)}
	}
}

// close stops collecting, fails what was collected and not proposed, and
// returns once no entry is in flight. The node host must already be
// closed, or entries in flight would wait for their deadlines.
func (c *coalescer) close() {
	close(c.stop)
	<-c.done
	for range cap(c.slots) {
		c.slots <- struct{}{}
	}
}
