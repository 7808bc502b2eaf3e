package storage

import (
	"testing"

	"go.uber.org/goleak"
)

// The GC loop and badger's own goroutines must all be gone once every DB a
// test opened is closed.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
