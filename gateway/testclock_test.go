//go:build testhooks

package gateway

import (
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// The chaos suite's clock: SetTestClock replaces what the gateway stamps
// and reads; nil puts the wall clock back.
func TestSetTestClock(t *testing.T) {
	srv, err := New(Config{ListenAddr: "127.0.0.1:0"}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Since(srv.now()); d < 0 || d > time.Minute {
		t.Fatalf("default clock off by %v", d)
	}
	jumped := time.Now().Add(time.Hour)
	srv.SetTestClock(func() time.Time { return jumped })
	if got := srv.now(); !got.Equal(jumped) {
		t.Fatalf("now() = %v with the test clock set, want %v", got, jumped)
	}
	srv.SetTestClock(nil)
	if d := time.Since(srv.now()); d < 0 || d > time.Minute {
		t.Fatalf("clock after SetTestClock(nil) off by %v", d)
	}
}
