package load

import (
	"context"
	"time"
)

// Pacer is one client's schedule in an open-loop run: client i of n at a
// total rate r issues an op every n/r seconds, the first i/r seconds after
// the common start, so the n clients' ops are spread evenly over each
// period and never fire together.
type Pacer struct {
	next   time.Time
	period time.Duration
}

// NewPacer is client i's schedule (of clients, at rate ops/s in total).
func NewPacer(start time.Time, i, clients int, rate float64) *Pacer {
	return &Pacer{
		next:   start.Add(time.Duration(float64(i) / rate * float64(time.Second))),
		period: time.Duration(float64(clients) / rate * float64(time.Second)),
	}
}

// Next returns the scheduled start of the next op and moves the schedule
// on by one period, whenever the op actually starts: a client that fell
// behind starts its next ops at once until it has caught up.
func (p *Pacer) Next() time.Time {
	t := p.next
	p.next = p.next.Add(p.period)
	return t
}

// clock is time as the paced loop sees it (tests substitute a fake).
type clock interface {
	Now() time.Time
	// SleepUntil returns at t, at once if t has passed, or when ctx ends.
	SleepUntil(ctx context.Context, t time.Time)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) SleepUntil(ctx context.Context, t time.Time) {
	Sleep(ctx, time.Until(t))
}

// pacedPairs is one W1 client in an open-loop run: an acquire+release
// pair at each of the pacer's scheduled starts. Latency runs from the
// scheduled start, not from the moment the op was sent, so a slow server
// cannot hide the ops it delayed (no coordinated omission).
func pacedPairs(ctx context.Context, clk clock, p *Pacer, l Locker, key string, sh *Shard) {
	for {
		at := p.Next()
		clk.SleepUntil(ctx, at)
		if ctx.Err() != nil {
			return
		}
		if pair(ctx, l, key, sh) {
			sh.Done(clk.Now().Sub(at))
		}
	}
}
