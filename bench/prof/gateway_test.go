package prof

import (
	"context"
	"fmt"
	"net"
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
			var next atomic.Int64
			b.SetParallelism(max(1, c/2))
			cpu0 := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				id := next.Add(1)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				cl, err := client.Dial(ctx, addr)
				cancel()
				if err != nil {
					b.Error(err)
					return
				}
				defer cl.Close()
				key := fmt.Sprintf("bench-%d", id)
				acq := client.Instance(key, "NON_REENTRANT", key, client.Ms(30000), nil)
				rel := client.Instance(key, "NON_REENTRANT", key, client.Ms(0), nil)
				for pb.Next() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					r, err := cl.Lock(ctx, protocol.OpAcquire, acq)
					if err != nil || !r.Result {
						b.Errorf("acquire: %v %+v", err, r)
					}
					r, err = cl.Lock(ctx, protocol.OpRelease, rel)
					if err != nil || !r.Result {
						b.Errorf("release: %v %+v", err, r)
					}
					cancel()
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			b.ReportMetric((processCPU()-cpu0)*1e6/float64(b.N), "cpu-us/pair")
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
			var next atomic.Int64
			b.SetParallelism(max(1, c/2))
			cpu0 := processCPU()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				id := next.Add(1)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				cl, err := client.Dial(ctx, addr)
				if err != nil {
					b.Error(err)
					return
				}
				defer cl.Close()
				key := fmt.Sprintf("renew-%d-%d", c, id)
				lease := client.Instance(key, "NON_REENTRANT", key, client.Ms(30000), nil)
				if r, err := cl.Lock(ctx, protocol.OpAcquire, lease); err != nil || !r.Result {
					b.Errorf("acquire: %v %+v", err, r)
					return
				}
				for pb.Next() {
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
					r, err := cl.Lock(ctx, protocol.OpRenew, lease)
					cancel()
					if err != nil || !r.Result {
						b.Errorf("renew: %v %+v", err, r)
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "renews/s")
			b.ReportMetric((processCPU()-cpu0)*1e6/float64(b.N), "cpu-us/renew")
		})
	}
}
