package h2grpc

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"nacos-lockd/protocol/pb"
)

// BenchmarkUnary is one unary call through the server, h2grpc against
// grpc-go's server with the same lean client (pre-encoded frames, one call
// in flight), so allocs/op is the server's plus the client's few (two
// HEADERS frames per call). The handler echoes a lock-sized message.
//
// 2026-12-01, 2 cores shared with other work (time is noise, allocations
// are not): h2grpc 17 allocs/op, grpc-go 68 allocs/op (see the report on
// branch transport).
func BenchmarkUnary(b *testing.B) {
	for _, name := range []string{"h2grpc", "grpc-go"} {
		b.Run(name, func(b *testing.B) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			var stop func()
			if name == "h2grpc" {
				s := NewServer(Config{}, Handlers{Unary: echo})
				go func() { _ = s.Serve(lis) }()
				stop = s.Stop
			} else {
				gs := grpc.NewServer()
				pb.RegisterRequestServer(gs, echoServer{})
				go func() { _ = gs.Serve(lis) }()
				stop = gs.Stop
			}
			defer stop()
			c := newBenchClient(b, lis.Addr().String())
			msg := grpcMessage(payload("LockOperationRequest", `{"lockInstance":{"key":"bench-w1-1764547200000000000-12","expiredTime":30000,"lockType":"NON_REENTRANT","owner":"bench-12-1764547200000000000"},"lockOperationEnum":"ACQUIRE","requestId":"12345","headers":{"accessToken":""},"module":"lock"}`))
			b.ReportAllocs()
			for b.Loop() {
				c.call(b, msg)
			}
		})
	}
}

type echoServer struct{ pb.UnimplementedRequestServer }

func (echoServer) Request(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
	return echo(ctx, p)
}

// benchClient is a minimal HTTP/2 gRPC client: it allocates next to
// nothing, so a benchmark's allocations are the server's.
type benchClient struct {
	nc    net.Conn
	bw    *bufio.Writer
	fr    *http2.Framer
	block []byte
	next  uint32
	owed  uint32 // DATA received, not yet returned as connection window
}

func newBenchClient(b *testing.B, addr string) *benchClient {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { nc.Close() })
	c := &benchClient{nc: nc, bw: bufio.NewWriter(nc), next: 1}
	c.fr = http2.NewFramer(c.bw, bufio.NewReader(nc))
	c.fr.SetReuseFrames()
	// A header block valid on every call: no dynamic table entries.
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	enc.SetMaxDynamicTableSizeLimit(0)
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: UnaryMethod}, {Name: ":authority", Value: addr},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	} {
		_ = enc.WriteField(f)
	}
	c.block = hb.Bytes()
	_, _ = c.bw.WriteString(http2.ClientPreface)
	_ = c.fr.WriteSettings(http2.Setting{ID: http2.SettingHeaderTableSize, Val: 0})
	if err := c.bw.Flush(); err != nil {
		b.Fatal(err)
	}
	return c
}

func (c *benchClient) call(b *testing.B, msg []byte) {
	id := c.next
	c.next += 2
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: c.block, EndHeaders: true}); err != nil {
		b.Fatal(err)
	}
	if err := c.fr.WriteData(id, true, msg); err != nil {
		b.Fatal(err)
	}
	if err := c.bw.Flush(); err != nil {
		b.Fatal(err)
	}
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			b.Fatal(err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = c.fr.WriteSettingsAck()
				_ = c.bw.Flush()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = c.fr.WritePing(true, f.Data)
				_ = c.bw.Flush()
			}
		case *http2.DataFrame:
			if c.owed += f.Header().Length; c.owed > 16<<10 {
				_ = c.fr.WriteWindowUpdate(0, c.owed)
				_ = c.bw.Flush()
				c.owed = 0
			}
		case *http2.HeadersFrame:
			if f.StreamID == id && f.StreamEnded() {
				return
			}
		case *http2.GoAwayFrame:
			b.Fatalf("GOAWAY %v", f.ErrCode)
		case *http2.RSTStreamFrame:
			b.Fatalf("RST_STREAM %v", f.ErrCode)
		}
	}
}

// BenchmarkUnaryGRPCClient is the same with grpc-go's client (which pings
// after every response, to size its windows), reporting the server's
// write calls per call: the PING ACK rides with the next response instead
// of costing a write of its own. 2026-12-01: h2grpc 1.10-1.12 writes/op,
// grpc-go 1.22-1.27.
func BenchmarkUnaryGRPCClient(b *testing.B) {
	for _, name := range []string{"h2grpc", "grpc-go"} {
		b.Run(name, func(b *testing.B) {
			lis, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			var writes atomic.Int64
			cl := countingListener{lis, &writes}
			if name == "h2grpc" {
				s := NewServer(Config{}, Handlers{Unary: echo})
				go func() { _ = s.Serve(cl) }()
				defer s.Stop()
			} else {
				gs := grpc.NewServer()
				pb.RegisterRequestServer(gs, echoServer{})
				go func() { _ = gs.Serve(cl) }()
				defer gs.Stop()
			}
			cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				b.Fatal(err)
			}
			defer cc.Close()
			client := pb.NewRequestClient(cc)
			req := payload("T", "lock-sized request body")
			if _, err := client.Request(context.Background(), req); err != nil {
				b.Fatal(err)
			}
			writes.Store(0)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := client.Request(context.Background(), req); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(writes.Load())/float64(b.N), "writes/op")
		})
	}
}

type countingListener struct {
	net.Listener
	writes *atomic.Int64
}

func (l countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countingConn{c, l.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}
