package load

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Locker is one client of a lock service, on its own connection.
type Locker interface {
	// Acquire takes key and returns when it is held. With wait set it
	// blocks in the service's queue (or retries, for a service without
	// one) until ctx ends; otherwise a held key is an error.
	Acquire(ctx context.Context, key string, wait bool) (Grant, error)
	// Release frees a key this client holds.
	Release(ctx context.Context, key string) error
	Close() error
}

// Grant describes how a lock was obtained, for the FIFO check.
type Grant struct {
	// Sent and Replied bracket the request that either took the lock at
	// once or put the client in the server's queue.
	Sent, Replied time.Time
	// Token is the fencing token of the grant; HasToken is false for
	// services without tokens (then FIFO is not checked).
	Token    uint64
	HasToken bool
}

// ErrHeld is Acquire's error for a held key when not waiting.
var ErrHeld = errors.New("lock held by another client")

// Dialer opens client i.
type Dialer func(ctx context.Context, i int) (Locker, error)

// DialAll opens n clients, in parallel batches.
func DialAll(ctx context.Context, n int, dial Dialer) ([]Locker, error) {
	out := make([]Locker, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			out[i], errs[i] = dial(dctx, i)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		CloseAll(out)
		return nil, fmt.Errorf("connect %d clients: %w", n, err)
	}
	return out, nil
}

// CloseAll closes every non-nil client.
func CloseAll(ls []Locker) {
	var wg sync.WaitGroup
	for _, l := range ls {
		if l != nil {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = l.Close()
			}()
		}
	}
	wg.Wait()
}

// W1 is the uncontended workload: each client acquires and releases its
// own key; one op is the pair. Closed loop by default (the next pair as
// soon as the last returns: peak throughput); with spec.Rate above 0 open
// loop, each client on its Pacer's schedule.
func W1(ctx context.Context, spec Spec, ls []Locker) Report {
	prefix := fmt.Sprintf("bench-w1-%d-", time.Now().UnixNano())
	// One start for every client's schedule, after they have all begun.
	start := time.Now().Add(10 * time.Millisecond)
	return Run(ctx, spec, func(ctx context.Context, id int, sh *Shard) {
		key := prefix + fmt.Sprint(id)
		l := ls[id]
		if spec.Rate > 0 {
			pacedPairs(ctx, realClock{}, NewPacer(start, id, spec.Clients, spec.Rate), l, key, sh)
			return
		}
		for ctx.Err() == nil {
			t0 := time.Now()
			if pair(ctx, l, key, sh) {
				sh.Done(time.Since(t0))
			}
		}
	})
}

// pair acquires and releases key, recording a failure (outside the end of
// the run) on sh; it reports whether both calls succeeded.
func pair(ctx context.Context, l Locker, key string, sh *Shard) bool {
	if _, err := l.Acquire(ctx, key, false); err != nil {
		if ctx.Err() == nil {
			sh.Fail(fmt.Errorf("acquire: %w", err))
		}
		return false
	}
	if err := l.Release(ctx, key); err != nil {
		if ctx.Err() == nil {
			sh.Fail(fmt.Errorf("release: %w", err))
		}
		return false
	}
	return true
}

// W2 is the contended workload: every client blocks on ONE key, holds it
// for hold (0: releases at once) and queues again. One op is a grant; its
// latency runs from the acquire request to holding the lock. When the
// target has fencing tokens, grants are checked for FIFO order.
func W2(ctx context.Context, spec Spec, ls []Locker, hold time.Duration) Report {
	key := fmt.Sprintf("bench-w2-%d", time.Now().UnixNano())
	var mu sync.Mutex
	var grants []Grant
	tokens := true
	rep := Run(ctx, spec, func(ctx context.Context, id int, sh *Shard) {
		l := ls[id]
		var mine []Grant
		defer func() {
			mu.Lock()
			grants = append(grants, mine...)
			mu.Unlock()
		}()
		for ctx.Err() == nil {
			t0 := time.Now()
			g, err := l.Acquire(ctx, key, true)
			if err != nil {
				if ctx.Err() == nil {
					sh.Fail(fmt.Errorf("acquire: %w", err))
				}
				continue
			}
			sh.Done(time.Since(t0))
			mine = append(mine, g)
			if !g.HasToken {
				mu.Lock()
				tokens = false
				mu.Unlock()
			}
			Sleep(ctx, hold)
			// Release with a context of its own: a lock left held at the
			// end would only delay the next run's clients.
			rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			err = l.Release(rctx, key)
			cancel()
			if err != nil {
				sh.Fail(fmt.Errorf("release: %w", err))
			}
		}
	})
	if tokens {
		rep.FIFOViolations = FIFOViolations(grants)
		rep.FIFOChecked = int64(len(grants))
	}
	return rep
}

// FIFOViolations counts grants that provably broke FIFO order. It uses
// only what proves order: if B's queuing request was answered before A's
// was sent, B was queued (or granted) by an earlier Raft entry than A, so
// a FIFO server must grant B first, that is with a smaller fencing token
// (tokens are the indexes of the granting entries, so they follow grant
// order). A grant A is a violation when some grant with a larger token
// than A's was queued, provably, before A asked. Pairs whose requests
// overlapped in time prove nothing and are not judged, so a correct
// server always scores 0.
func FIFOViolations(gs []Grant) int64 {
	gs = slices.Clone(gs)
	slices.SortFunc(gs, func(a, b Grant) int {
		switch {
		case a.Token < b.Token:
			return -1
		case a.Token > b.Token:
			return 1
		}
		return 0
	})
	var bad int64
	var minLater time.Time // earliest reply among grants with larger tokens
	for i := len(gs) - 1; i >= 0; i-- {
		g := gs[i]
		if !minLater.IsZero() && minLater.Before(g.Sent) {
			bad++
		}
		if minLater.IsZero() || g.Replied.Before(minLater) {
			minLater = g.Replied
		}
	}
	return bad
}
