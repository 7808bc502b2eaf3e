//go:build !testhooks

package server

import (
	"time"

	"nacos-lockd/gateway"
)

// setTestClock does nothing in a release build: the gateway has no test
// clock (gateway/clock.go), and Config.Hooks is always nil.
func setTestClock(*gateway.Server, func() time.Time) {}
