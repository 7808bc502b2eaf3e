//go:build !testhooks

package gateway

import "time"

// testClock is the gateway's clock: the wall clock, always. A build with
// -tags testhooks (testclock.go) lets the chaos suite shift it instead.
type testClock struct{}

func (testClock) now() time.Time { return time.Now() }
