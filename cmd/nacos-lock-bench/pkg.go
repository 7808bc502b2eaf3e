package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"nacos-lockd/bench/load"
	"nacos-lockd/nacoslock"
)

// pkgLocker is one application using the nacoslock package, the Go
// library beside which etcd's concurrency.Mutex is measured: its own
// Client (one connection), one Mutex per key, Lock for a waiter and
// TryLock otherwise, the watchdog running while a lock is held. Against
// the raw nacos-lockd target it shows what the library adds per call.
type pkgLocker struct {
	cl    *nacoslock.Client
	lease time.Duration
	mu    sync.Mutex
	ms    map[string]*nacoslock.Mutex
}

func dialPkg(server string, lease int64) load.Dialer {
	return func(ctx context.Context, i int) (load.Locker, error) {
		cl, err := nacoslock.Dial(ctx, []string{server}, nacoslock.WithClientName(fmt.Sprintf("nacos-lock-bench-%d", i)))
		if err != nil {
			return nil, err
		}
		return &pkgLocker{cl: cl, lease: time.Duration(lease) * time.Millisecond, ms: map[string]*nacoslock.Mutex{}}, nil
	}
}

func (p *pkgLocker) mutex(key string) *nacoslock.Mutex {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, ok := p.ms[key]
	if !ok {
		m = p.cl.Mutex(key, nacoslock.WithLease(p.lease))
		p.ms[key] = m
	}
	return m
}

func (p *pkgLocker) Acquire(ctx context.Context, key string, wait bool) (load.Grant, error) {
	m := p.mutex(key)
	sent := time.Now()
	var err error
	if wait {
		err = m.Lock(ctx)
	} else {
		err = m.TryLock(ctx)
	}
	if errors.Is(err, nacoslock.ErrLocked) {
		return load.Grant{}, load.ErrHeld
	}
	if err != nil {
		return load.Grant{}, err
	}
	// The package does not say when a queued request was answered, only
	// when the lock was granted: Replied is that later time, which only
	// makes the FIFO check compare fewer pairs (load.FIFOViolations).
	return load.Grant{Sent: sent, Replied: time.Now(), Token: m.FencingToken(), HasToken: true}, nil
}

func (p *pkgLocker) Release(ctx context.Context, key string) error {
	return p.mutex(key).Unlock(ctx)
}

func (p *pkgLocker) Close() error { return p.cl.Close() }
