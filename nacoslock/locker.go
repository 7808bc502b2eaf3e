package nacoslock

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Locker adapts a Mutex to sync.Locker for code that takes one and cannot
// pass a context. Its limits:
//
//   - Lock blocks until the lock is granted, with no way to give up; Lock
//     and Unlock panic on an error (a closed Client, a refusal by auth, an
//     Unlock of a lock that was lost), because sync.Locker cannot return
//     one. Unlock gives the server unlockTimeout to answer.
//   - Nobody is told when the hold is lost: the watchdog keeps renewing,
//     but code holding a sync.Locker cannot watch Lost. Use the Mutex
//     itself (Lost, FencingToken) wherever the protected work can be
//     stopped or fenced.
//   - Goroutines of this process that share the Locker take a local mutex
//     first, so they queue locally, then one at a time on the server, as
//     with a sync.Mutex. It is not reentrant, whatever the Mutex's kind.
func (m *Mutex) Locker() sync.Locker { return &locker{m: m} }

const unlockTimeout = 30 * time.Second

type locker struct {
	local sync.Mutex
	m     *Mutex
}

func (l *locker) Lock() {
	l.local.Lock()
	if err := l.m.Lock(context.Background()); err != nil {
		l.local.Unlock()
		panic(fmt.Sprintf("nacoslock: Locker.Lock: %v", err))
	}
}

func (l *locker) Unlock() {
	ctx, cancel := context.WithTimeout(context.Background(), unlockTimeout)
	defer cancel()
	err := l.m.Unlock(ctx)
	l.local.Unlock()
	if err != nil {
		panic(fmt.Sprintf("nacoslock: Locker.Unlock: %v", err))
	}
}
