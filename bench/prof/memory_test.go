package prof

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"nacos-lockd/statemachine"
)

// TestTableMemoryPerLock reports the Go heap the lock table alone uses
// per held lock. It reports, never asserts, and runs only with
// PROF_MEMORY set to the number of locks (1 means 200000; W3 holds
// 1000000): go test -run TableMemory -v ./bench/prof/. The changed-lock
// set is drained every 64 commands, as the disk state machine drains it
// with every entry it writes, so it is not counted.
func TestTableMemoryPerLock(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PROF_MEMORY"))
	switch {
	case os.Getenv("PROF_MEMORY") == "":
		t.Skip("set PROF_MEMORY=1 (200000 locks) or PROF_MEMORY=<locks> to run")
	case n <= 1:
		n = 200000
	}
	conns := 256
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	h0 := heap()
	tb := statemachine.NewTable()
	now := time.Now().UnixMilli()
	for i := range n {
		c := i % conns
		conn := fmt.Sprintf("1764492000000_127.0.0.1_%d_1", 40000+c)
		owner := fmt.Sprintf("bench-%d-1764492000000000000", c)
		res := tb.Apply(uint64(i+1), statemachine.Command{Op: statemachine.OpAcquire, NowMs: now, Kind: statemachine.KindNonReentrant,
			Key: fmt.Sprintf("bench-w3-1764492000000000000-%d", i), Owner: owner, ConnID: conn, LeaseMs: 1800000})
		if !res.Success() {
			t.Fatalf("acquire %d: %v", i, res.Code)
		}
		if i%64 == 63 {
			tb.DiscardChanges()
		}
	}
	tb.DiscardChanges()
	h1 := heap()
	t.Logf("table heap: %.0f bytes per held lock (%d locks, %d connections)", float64(h1-h0)/float64(n), n, conns)
	runtime.KeepAlive(tb)
}
