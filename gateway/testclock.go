//go:build testhooks

package gateway

import "time"

// TEST ONLY, and only in a build with -tags testhooks (release builds
// compile clock.go): the chaos suite's --test-hooks injects clock offsets
// and jumps into the clock the gateway stamps commands with and the reaper
// and the node monitor read.
type testClock struct{ fn func() time.Time }

func (c *testClock) now() time.Time {
	if c.fn != nil {
		return c.fn()
	}
	return time.Now()
}

// SetTestClock replaces the gateway's clock; nil means time.Now. Call it
// right after New, before Serve and before the state machine can call
// Notify: the clock is read without synchronisation.
func (s *Server) SetTestClock(now func() time.Time) { s.clock.fn = now }
