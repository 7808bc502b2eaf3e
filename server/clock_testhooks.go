//go:build testhooks

package server

import (
	"time"

	"nacos-lockd/gateway"
)

// setTestClock gives the gateway the test hooks' clock (nil: time.Now),
// right after gateway.New and before the node can deliver notifications.
func setTestClock(gw *gateway.Server, now func() time.Time) {
	if now != nil {
		gw.SetTestClock(now)
	}
}
