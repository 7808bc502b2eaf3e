//go:build !testhooks

package main

import (
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/server"
)

// A release build has no test hooks: testhooks.go, the chaos suite's fault
// injection, is compiled only with -tags testhooks. parseConfig refuses
// --test-hooks here (errNoTestHooks), so that a run expecting hooks fails
// with a reason, and --help does not list it.

const testHooksBuilt = false

// testHooks is never instantiated here: a nil *testHooks does nothing.
type testHooks struct{}

func startTestHooks(path string, _ zerolog.Logger) (*testHooks, error) {
	if path != "" {
		return nil, errNoTestHooks
	}
	return nil, nil
}

func (*testHooks) stop()                              {}
func (*testHooks) Clock() func() time.Time            { return nil }
func (*testHooks) AttachNode(server.LeaderTransferer) {}
