package control

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"nacos-lockd/statemachine"
)

// scheduleCleanup proposes CLEANUP_CONNECTION for a closed connection after
// the grace period, retrying until it commits or the server stops. Leases
// remain the backstop if it never does.
func (s *Loops) scheduleCleanup(connID string) {
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		if !s.sleep(s.cfg.DisconnectGrace) {
			return
		}
		backoff := 50 * time.Millisecond
		for attempt := 1; ; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
			_, err := s.table.Propose(ctx, statemachine.Command{
				Op: statemachine.OpCleanupConnection, NowMs: s.now().UnixMilli(), ConnID: connID,
			})
			cancel()
			if err == nil {
				s.cfg.Events.cleaned("disconnect")
				return
			}
			s.log.Warn().Err(err).Str("conn_id", connID).Int("attempt", attempt).Msg("connection cleanup not committed; retrying")
			if !s.sleep(backoff) {
				return
			}
			backoff = min(2*backoff, 5*time.Second)
		}
	}()
}

// sleep waits d or until shutdown; it reports whether to carry on.
func (s *Loops) sleep(d time.Duration) bool {
	if d <= 0 {
		return !s.stopping.Load()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-s.stop:
		return false
	}
}

// reap runs the expiry reaper: on the leader only, every scan interval it
// proposes EXPIRE for every lease that ended. The proposals go out
// reapParallel at a time, so dragonboat commits and applies them in shared
// batches instead of one Raft round each, and the scan repeats at once
// while it keeps finding full batches. Apply re-checks the token and the
// clock, so a renew that commits first always wins.
func (s *Loops) reap() {
	const batch = 1024
	for s.sleep(s.cfg.ScanInterval) {
		s.cfg.Events.scanned(s.now())
		for s.table.IsLeader() && !s.stopping.Load() {
			leases, err := s.table.Expired(s.now().UnixMilli(), batch)
			if err != nil {
				s.log.Debug().Err(err).Msg("reaper could not read leases")
				break
			}
			if !s.expireAll(leases) || len(leases) < batch {
				break
			}
		}
	}
}

// reapParallel bounds the EXPIRE proposals in flight.
const reapParallel = 64

// expireAll proposes EXPIRE for each lease and waits for all of them. It
// reports false when one could not be committed (the next scan retries).
func (s *Loops) expireAll(leases []statemachine.ExpiredLease) bool {
	sem := make(chan struct{}, reapParallel)
	var wg sync.WaitGroup
	var failed atomic.Bool
	for _, l := range leases {
		if s.stopping.Load() || failed.Load() {
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() {
				<-sem
				wg.Done()
			}()
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
			res, err := s.table.Propose(ctx, statemachine.Command{
				Op: statemachine.OpExpire, NowMs: s.now().UnixMilli(), Kind: l.Kind, Key: l.Key, Token: l.Token,
			})
			cancel()
			if err != nil {
				if !errors.Is(err, context.Canceled) && failed.CompareAndSwap(false, true) {
					s.log.Debug().Err(err).Msg("expiry not committed; next scan retries")
				}
				return
			}
			if res.Success() {
				s.cfg.Events.expired()
			}
		}()
	}
	wg.Wait()
	return !failed.Load()
}
