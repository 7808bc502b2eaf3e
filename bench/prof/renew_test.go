package prof

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"nacos-lockd/interop/client"
	"nacos-lockd/protocol"
)

// TestPacedRenews is W5's shape in one process, for a CPU profile of the
// server under spread-out renews: 100 connections, 1000 renews/s in
// total, evenly paced. It reports, never asserts, and runs only with
// PROF_W5=1:
//
//	PROF_W5=1 go test -run PacedRenews -v -cpuprofile /tmp/w5.prof ./bench/prof/
func TestPacedRenews(t *testing.T) {
	if os.Getenv("PROF_W5") == "" {
		t.Skip("set PROF_W5=1 to run")
	}
	const conns, perConn, rate, dur = 100, 10, 1000, 10 * time.Second
	addr := startServer(t)
	var wg sync.WaitGroup
	cpu0 := processCPU()
	start := time.Now()
	var mu sync.Mutex
	renews := 0
	for c := range conns {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), dur+30*time.Second)
			defer cancel()
			cl, err := client.Dial(ctx, addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer cl.Close()
			leases := make([]protocol.LockInstance, perConn)
			for i := range leases {
				key := fmt.Sprintf("w5-%d-%d", c, i)
				leases[i] = client.Instance(key, "NON_REENTRANT", key, client.Ms(60000), nil)
				if err := lockOK(ctx, cl, protocol.OpAcquire, leases[i]); err != nil {
					t.Error(err)
					return
				}
			}
			every := time.Duration(conns) * time.Second / rate
			time.Sleep(time.Duration(c) * every / conns) // spread the connections' phases
			tick := time.NewTicker(every)
			defer tick.Stop()
			n := 0
			for time.Since(start) < dur {
				<-tick.C
				if err := lockOK(ctx, cl, protocol.OpRenew, leases[n%perConn]); err != nil {
					t.Error(err)
					return
				}
				n++
			}
			mu.Lock()
			renews += n
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("%d renews in %s, %.0f µs process CPU per renew (clients included)", renews, time.Since(start).Round(time.Millisecond),
		(processCPU()-cpu0)*1e6/float64(renews))
}
