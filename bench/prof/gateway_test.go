package prof

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/gateway"
	"nacos-lockd/interop/client"
	"nacos-lockd/protocol"
)

// startServer runs the whole server in this process: gateway over the
// replicated table, on a loopback port.
func startServer(b testing.TB) string {
	b.Helper()
	n := startNode(b)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	gw, err := gateway.New(gateway.Config{ListenAddr: lis.Addr().String(), NodeID: "1"}, zerolog.Nop())
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gw.Serve(ctx, lis, n) }()
	b.Cleanup(func() { cancel(); <-done })
	return lis.Addr().String()
}

// BenchmarkGateway is W1 in one process: acquire+release pairs over the
// real protocol, one connection per client. CPU per pair includes the
// clients'.
func BenchmarkGateway(b *testing.B) {
	addr := startServer(b)
	for _, c := range clients {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			perConnection(b, addr, c, "pair", func(_ context.Context, cl *client.Client, id int64) (func(context.Context) error, error) {
				key := fmt.Sprintf("bench-%d-%d", c, id)
				acq := client.Instance(key, "NON_REENTRANT", key, client.Ms(30000), nil)
				rel := client.Instance(key, "NON_REENTRANT", key, client.Ms(0), nil)
				return func(ctx context.Context) error {
					if err := lockOK(ctx, cl, protocol.OpAcquire, acq); err != nil {
						return err
					}
					return lockOK(ctx, cl, protocol.OpRelease, rel)
				}, nil
			})
		})
	}
}

// BenchmarkGatewayRenew is W5's unit of work in one process: each client
// holds one lock and renews it back to back, over the real protocol. CPU
// per renew includes the clients'.
func BenchmarkGatewayRenew(b *testing.B) {
	addr := startServer(b)
	for _, c := range clients {
		b.Run(fmt.Sprintf("c=%d", c), func(b *testing.B) {
			perConnection(b, addr, c, "renew", func(ctx context.Context, cl *client.Client, id int64) (func(context.Context) error, error) {
				key := fmt.Sprintf("renew-%d-%d", c, id)
				lease := client.Instance(key, "NON_REENTRANT", key, client.Ms(30000), nil)
				if err := lockOK(ctx, cl, protocol.OpAcquire, lease); err != nil {
					return nil, err
				}
				return func(ctx context.Context) error { return lockOK(ctx, cl, protocol.OpRenew, lease) }, nil
			})
		})
	}
}

// perConnection runs b.N ops from c clients, each on its own connection:
// setup readies a client (dials are done, its locks taken) and returns the
// op it repeats. It reports ops/s and process CPU per op (clients included).
// It starts exactly c goroutines (RunParallel would start a multiple of
// GOMAXPROCS, two clients for c=1 here).
func perConnection(b *testing.B, addr string, c int, unit string,
	setup func(ctx context.Context, cl *client.Client, id int64) (func(context.Context) error, error)) {
	var left atomic.Int64
	left.Store(int64(b.N))
	cpu0 := processCPU()
	b.ResetTimer()
	var wg sync.WaitGroup
	for id := range c {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			cl, err := client.Dial(ctx, addr)
			if err != nil {
				b.Error(err)
				return
			}
			defer cl.Close()
			op, err := setup(ctx, cl, int64(id)+1)
			if err != nil {
				b.Error(err)
				return
			}
			for left.Add(-1) >= 0 {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				err := op(ctx)
				cancel()
				if err != nil {
					b.Error(err)
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), unit+"s/s")
	b.ReportMetric((processCPU()-cpu0)*1e6/float64(b.N), "cpu-us/"+unit)
}

// lockOK sends one lock request and wants it granted.
func lockOK(ctx context.Context, cl *client.Client, op protocol.LockOp, li protocol.LockInstance) error {
	r, err := cl.Lock(ctx, op, li)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	if !r.Result {
		return fmt.Errorf("%s refused: code %d %s", op, r.ResultCode, r.Message)
	}
	return nil
}
