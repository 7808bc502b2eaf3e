package h2grpc

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/encoding/gzip" // the client compresses; the server must refuse
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"

	"nacos-lockd/internal/syncbuf"
	"nacos-lockd/interop/testcerts"
	"nacos-lockd/protocol/pb"
)

// tagAddr is what the test listener puts on accepted connections, as the
// gateway's trackedListener does: handlers must see this very value.
type tagAddr struct {
	net.Addr
	n int
}

type tagListener struct {
	net.Listener
	n atomic.Int64
}

func (l *tagListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return tagConn{nc, &tagAddr{nc.RemoteAddr(), int(l.n.Add(1))}}, nil
}

type tagConn struct {
	net.Conn
	a *tagAddr
}

func (c tagConn) RemoteAddr() net.Addr { return c.a }

// SyscallConn is the socket's, as the gateway's trackedConn gives it, so
// that TryReply can write to it.
func (c tagConn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}

type testServer struct {
	*Server
	addr string
	done chan error
	logs *syncbuf.Buffer
}

func startServer(t *testing.T, cfg Config, h Handlers) *testServer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if h.Unary == nil {
		h.Unary = echo
	}
	if h.Stream == nil {
		h.Stream = func(s grpc.BidiStreamingServer[pb.Payload, pb.Payload]) error {
			for {
				p, err := s.Recv()
				if err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
				if err := s.Send(p); err != nil {
					return err
				}
			}
		}
	}
	logs := &syncbuf.Buffer{}
	cfg.Log = zerolog.New(logs).Level(zerolog.InfoLevel)
	s := &testServer{Server: NewServer(cfg, h), addr: lis.Addr().String(), done: make(chan error, 1), logs: logs}
	go func() { s.done <- s.Serve(&tagListener{Listener: lis}) }()
	t.Cleanup(func() {
		s.Stop()
		if err := <-s.done; !errors.Is(err, ErrServerStopped) {
			t.Errorf("Serve returned %v, want ErrServerStopped", err)
		}
	})
	return s
}

func echo(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
	return &pb.Payload{Metadata: p.GetMetadata(), Body: p.GetBody()}, nil
}

func dial(t *testing.T, addr string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	cc, err := grpc.NewClient("passthrough:///"+addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

func payload(typ, body string) *pb.Payload {
	return &pb.Payload{Metadata: &pb.Metadata{Type: typ}, Body: &anypb.Any{Value: []byte(body)}}
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestUnaryCarriesPeerOfTheAcceptedConn(t *testing.T) {
	var mu sync.Mutex
	seen := map[*tagAddr]int{}
	s := startServer(t, Config{}, Handlers{Unary: func(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
		pr, ok := peer.FromContext(ctx)
		if !ok {
			return nil, status.Error(codes.Internal, "no peer")
		}
		a, ok := pr.Addr.(*tagAddr)
		if !ok {
			return nil, status.Errorf(codes.Internal, "peer address is %T", pr.Addr)
		}
		mu.Lock()
		seen[a]++
		mu.Unlock()
		return echo(ctx, p)
	}})
	ctx := testCtx(t)
	for range 2 {
		client := pb.NewRequestClient(dial(t, s.addr))
		for i := range 5 {
			body := fmt.Sprintf(`{"i":%d,"pad":"%s"}`, i, strings.Repeat("x", i*10000))
			r, err := client.Request(ctx, payload("ServerCheckRequest", body))
			if err != nil {
				t.Fatal(err)
			}
			if string(r.GetBody().GetValue()) != body || r.GetMetadata().GetType() != "ServerCheckRequest" {
				t.Fatalf("echo %d: got %q", i, r.GetBody().GetValue())
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("calls of two clients saw %d distinct connection addresses, want 2: %v", len(seen), seen)
	}
	for a, n := range seen {
		if n != 5 {
			t.Errorf("connection %d carried %d calls, want 5", a.n, n)
		}
	}
}

func TestTLSMutual(t *testing.T) {
	certs, err := testcerts.Generate(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var authInfo atomic.Value
	s := startServer(t, Config{TLS: &tls.Config{
		Certificates: []tls.Certificate{certs.Server}, ClientCAs: certs.CAPool,
		ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	}}, Handlers{Unary: func(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
		pr, _ := peer.FromContext(ctx)
		if _, ok := pr.Addr.(*tagAddr); !ok {
			return nil, status.Errorf(codes.Internal, "peer address under TLS is %T", pr.Addr)
		}
		authInfo.Store(pr.AuthInfo)
		return echo(ctx, p)
	}})
	ctx := testCtx(t)
	creds := credentials.NewTLS(&tls.Config{RootCAs: certs.CAPool, Certificates: []tls.Certificate{certs.Client}})
	client := pb.NewRequestClient(dial(t, s.addr, grpc.WithTransportCredentials(creds)))
	r, err := client.Request(ctx, payload("T", "over tls"))
	if err != nil {
		t.Fatal(err)
	}
	if string(r.GetBody().GetValue()) != "over tls" {
		t.Fatalf("got %q", r.GetBody().GetValue())
	}
	info, ok := authInfo.Load().(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 || info.State.NegotiatedProtocol != "h2" {
		t.Fatalf("handler's AuthInfo %#v, want TLSInfo with the client certificate and h2", authInfo.Load())
	}

	// Without a client certificate the handshake fails, and so the call.
	noCert := credentials.NewTLS(&tls.Config{RootCAs: certs.CAPool})
	_, err = pb.NewRequestClient(dial(t, s.addr, grpc.WithTransportCredentials(noCert))).Request(ctx, payload("T", "x"))
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("call without client certificate: %v, want Unavailable", err)
	}
	// Plaintext against the TLS port fails too, and the server still serves.
	_, err = pb.NewRequestClient(dial(t, s.addr)).Request(ctx, payload("T", "x"))
	if err == nil {
		t.Fatal("plaintext call on a TLS server succeeded")
	}
	if _, err := client.Request(ctx, payload("T", "again")); err != nil {
		t.Fatal(err)
	}
}

func TestBidiPushesAndReplies(t *testing.T) {
	const pushes = 50
	got := make(chan []string, 1)
	s := startServer(t, Config{}, Handlers{Stream: func(st grpc.BidiStreamingServer[pb.Payload, pb.Payload]) error {
		first, err := st.Recv()
		if err != nil {
			return err
		}
		if _, ok := peer.FromContext(st.Context()); !ok {
			return status.Error(codes.Internal, "no peer on the stream")
		}
		if err := st.Send(payload("SetupAck", string(first.GetBody().GetValue()))); err != nil {
			return err
		}
		// The writer pushes while a reader collects the client's replies,
		// as the gateway's RequestBiStream does.
		replies := make(chan []string, 1)
		go func() {
			var r []string
			for {
				p, err := st.Recv()
				if err != nil {
					replies <- r
					return
				}
				r = append(r, string(p.GetBody().GetValue()))
			}
		}()
		for i := range pushes {
			if err := st.Send(payload("Push", fmt.Sprint(i))); err != nil {
				return err
			}
		}
		got <- <-replies
		return status.Error(codes.Aborted, "done pushing")
	}})
	ctx := testCtx(t)
	stream, err := pb.NewBiRequestStreamClient(dial(t, s.addr)).RequestBiStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(payload("ConnectionSetupRequest", "hello")); err != nil {
		t.Fatal(err)
	}
	ack, err := stream.Recv()
	if err != nil || string(ack.GetBody().GetValue()) != "hello" {
		t.Fatalf("ack %v %v", ack, err)
	}
	for i := range pushes {
		p, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if string(p.GetBody().GetValue()) != fmt.Sprint(i) {
			t.Fatalf("push %d: %q", i, p.GetBody().GetValue())
		}
		if err := stream.Send(payload("PushReply", "r"+fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	r := <-got
	if len(r) != pushes || r[0] != "r0" || r[pushes-1] != fmt.Sprint("r", pushes-1) {
		t.Fatalf("server got %d replies: %v", len(r), r)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.Aborted || status.Convert(err).Message() != "done pushing" {
		t.Fatalf("stream ended with %v, want the handler's Aborted", err)
	}
}

func TestDeadlineAndCancellation(t *testing.T) {
	type seen struct {
		deadline time.Time
		hasDL    bool
		err      error
	}
	calls := make(chan seen, 2)
	entered := make(chan struct{}, 2)
	s := startServer(t, Config{}, Handlers{Unary: func(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
		if string(p.GetBody().GetValue()) != "wait" {
			return echo(ctx, p)
		}
		entered <- struct{}{}
		<-ctx.Done()
		dl, ok := ctx.Deadline()
		calls <- seen{dl, ok, ctx.Err()}
		return nil, status.FromContextError(ctx.Err()).Err()
	}})
	client := pb.NewRequestClient(dial(t, s.addr))
	// Connected first, so the call below reaches the server well within
	// its deadline even on a busy machine.
	if _, err := client.Request(testCtx(t), payload("T", "warm")); err != nil {
		t.Fatal(err)
	}
	next := func() seen { return receive(t, calls, "the handler to see its context end") }

	const timeout = time.Second
	before := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	_, err := client.Request(ctx, payload("T", "wait"))
	cancel()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("call past its deadline: %v", err)
	}
	c := next()
	// The client sends what is left of its timeout, so the server's
	// deadline lands at the client's, give or take the trip.
	if !c.hasDL || c.deadline.Before(before) || c.deadline.After(before.Add(timeout+time.Second)) {
		t.Fatalf("handler's deadline %v (set %v), want about %v", c.deadline, c.hasDL, before.Add(timeout))
	}
	if c.err == nil {
		t.Fatal("handler's context did not end")
	}

	ctx, cancel = context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := client.Request(ctx, payload("T", "wait"))
		errc <- err
	}()
	<-entered // the first call's
	// Cancel once the handler runs; its context must end.
	<-entered
	cancel()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled call: %v", err)
	}
	if c := next(); c.hasDL || !errors.Is(c.err, context.Canceled) {
		t.Fatalf("cancelled handler: deadline %v, err %v; want no deadline, Canceled", c.hasDL, c.err)
	}
	waitFor(t, "the stream to be released", func() bool { return s.activeStreams() == 0 })
}

func TestUnknownMethodAndStatusErrors(t *testing.T) {
	s := startServer(t, Config{}, Handlers{Unary: func(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
		switch string(p.GetBody().GetValue()) {
		case "status":
			return nil, status.Error(codes.NotFound, "100% naïve\nlines")
		case "plain":
			return nil, errors.New("plain error")
		case "context":
			return nil, fmt.Errorf("gave up: %w", context.DeadlineExceeded)
		}
		return echo(ctx, p)
	}})
	ctx := testCtx(t)
	cc := dial(t, s.addr)
	var out pb.Payload
	err := cc.Invoke(ctx, "/Request/other", payload("T", "x"), &out)
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("unknown method: %v", err)
	}
	client := pb.NewRequestClient(cc)
	_, err = client.Request(ctx, payload("T", "status"))
	if st := status.Convert(err); st.Code() != codes.NotFound || st.Message() != "100% naïve\nlines" {
		t.Fatalf("status error: %v", err)
	}
	_, err = client.Request(ctx, payload("T", "plain"))
	if st := status.Convert(err); st.Code() != codes.Unknown || st.Message() != "plain error" {
		t.Fatalf("plain error: %v", err)
	}
	// A context error keeps its code, as on grpc-go's server.
	_, err = client.Request(ctx, payload("T", "context"))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("context error: %v, want DeadlineExceeded", err)
	}
	// Compression is refused clearly.
	_, err = client.Request(ctx, payload("T", "x"), grpc.UseCompressor("gzip"))
	if st := status.Convert(err); st.Code() != codes.Unimplemented || !strings.Contains(st.Message(), "gzip") {
		t.Fatalf("compressed call: %v", err)
	}
	if _, err := client.Request(ctx, payload("T", "fine")); err != nil {
		t.Fatal(err)
	}
}

func TestMessageSizeLimits(t *testing.T) {
	s := startServer(t, Config{MaxRecvMsgSize: 1 << 10, MaxSendMsgSize: 2 << 10}, Handlers{Unary: func(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
		if string(p.GetBody().GetValue()) == "big reply" {
			return payload("T", strings.Repeat("y", 4<<10)), nil
		}
		return echo(ctx, p)
	}})
	ctx := testCtx(t)
	client := pb.NewRequestClient(dial(t, s.addr))
	_, err := client.Request(ctx, payload("T", strings.Repeat("x", 300<<10)))
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), "larger than max") {
		t.Fatalf("oversized request: %v", err)
	}
	_, err = client.Request(ctx, payload("T", "big reply"))
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted {
		t.Fatalf("oversized reply: %v", err)
	}
	if _, err := client.Request(ctx, payload("T", "small")); err != nil {
		t.Fatal(err)
	}

	// On the stream too: the stream fails, the connection stays.
	stream, err := pb.NewBiRequestStreamClient(dial(t, s.addr)).RequestBiStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(payload("T", strings.Repeat("x", 4<<10))); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized stream message: %v", err)
	}
	waitFor(t, "the streams to be released", func() bool { return s.activeStreams() == 0 })
}

func TestGracefulStopFinishesCallInFlight(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	s := startServer(t, Config{}, Handlers{Unary: func(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
		if string(p.GetBody().GetValue()) == "slow" {
			close(entered)
			<-release
		}
		return echo(ctx, p)
	}})
	ctx := testCtx(t)
	client := pb.NewRequestClient(dial(t, s.addr))
	if _, err := client.Request(ctx, payload("T", "warm")); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := client.Request(ctx, payload("T", "slow"))
		errc <- err
	}()
	<-entered
	stopped := make(chan struct{})
	go func() {
		s.GracefulStop()
		close(stopped)
	}()
	waitFor(t, "GOAWAY to be sent", func() bool { return s.allDraining() })
	select {
	case <-stopped:
		t.Fatal("GracefulStop returned with a call in flight")
	default:
	}
	// A new connection is refused; the old one finishes its call.
	if _, err := pb.NewRequestClient(dial(t, s.addr)).Request(ctx, payload("T", "new"), grpc.WaitForReady(false)); status.Code(err) != codes.Unavailable {
		t.Fatalf("call after GracefulStop: %v, want Unavailable", err)
	}
	close(release)
	if err := <-errc; err != nil {
		t.Fatalf("call in flight during GracefulStop: %v", err)
	}
	<-stopped
	if err := <-s.done; !errors.Is(err, ErrServerStopped) {
		t.Fatalf("Serve after GracefulStop: %v", err)
	}
	s.done <- ErrServerStopped // for the cleanup's check
}

func TestStopEndsCallsAndStreams(t *testing.T) {
	entered := make(chan struct{}, 2)
	s := startServer(t, Config{}, Handlers{
		Unary: func(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
			entered <- struct{}{}
			<-ctx.Done()
			return nil, status.FromContextError(ctx.Err()).Err()
		},
		Stream: func(st grpc.BidiStreamingServer[pb.Payload, pb.Payload]) error {
			entered <- struct{}{}
			<-st.Context().Done()
			return nil
		},
	})
	ctx := testCtx(t)
	cc := dial(t, s.addr)
	stream, err := pb.NewBiRequestStreamClient(cc).RequestBiStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		_, err := pb.NewRequestClient(cc).Request(ctx, payload("T", "x"))
		errc <- err
	}()
	<-entered
	<-entered
	s.Stop()
	if err := <-errc; status.Code(err) != codes.Unavailable {
		t.Fatalf("call during Stop: %v", err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("stream during Stop: %v", err)
	}
}

func TestManyConcurrentCalls(t *testing.T) {
	s := startServer(t, Config{MaxConcurrentStreams: 16}, Handlers{})
	ctx := testCtx(t)
	const conns, perConn, calls = 4, 32, 20
	var wg sync.WaitGroup
	errs := make(chan error, conns*perConn)
	for i := range conns {
		client := pb.NewRequestClient(dial(t, s.addr))
		for j := range perConn {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range calls {
					body := fmt.Sprintf("%d/%d/%d", i, j, k)
					r, err := client.Request(ctx, payload("T", body))
					if err != nil {
						errs <- err
						return
					}
					if got := string(r.GetBody().GetValue()); got != body {
						errs <- fmt.Errorf("got %q for %q", got, body)
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestPushWaitsForAClientThatDoesNotRead(t *testing.T) {
	const n, size = 16, 32 << 10 // 512 KiB against 64 KiB windows
	sent := make(chan int, n)
	s := startServer(t, Config{}, Handlers{Stream: func(st grpc.BidiStreamingServer[pb.Payload, pb.Payload]) error {
		if _, err := st.Recv(); err != nil {
			return err
		}
		for i := range n {
			if err := st.Send(payload("Push", fmt.Sprintf("%04d%s", i, strings.Repeat("p", size)))); err != nil {
				return err
			}
			sent <- i
		}
		return nil
	}})
	ctx := testCtx(t)
	// Fixed windows (no BDP growth): the client grants 64 KiB and more only
	// as its application reads.
	cc := dial(t, s.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	stream, err := pb.NewBiRequestStreamClient(cc).RequestBiStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(payload("Setup", "")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the push to wait for window", func() bool { return s.windowWaiters() > 0 })
	if len(sent) >= n-1 {
		t.Fatalf("%d of %d pushes went out to a client that reads nothing", len(sent), n)
	}
	// Reading lets every push through, whole and in order.
	for i := range n {
		p, err := stream.Recv()
		if err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
		if b := p.GetBody().GetValue(); len(b) != 4+size || string(b[:4]) != fmt.Sprintf("%04d", i) {
			t.Fatalf("push %d: %d bytes, starts %q", i, len(b), b[:min(len(b), 4)])
		}
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("end of stream: %v", err)
	}
}

func TestBidiRecvWindowComesBackAsHandlerReads(t *testing.T) {
	// The client sends more than the stream window; the server hands it
	// back only as Recv takes messages, and all of it arrives.
	const n, size = 64, 16 << 10 // 1 MiB against a 256 KiB stream window
	var total atomic.Int64
	s := startServer(t, Config{}, Handlers{Stream: func(st grpc.BidiStreamingServer[pb.Payload, pb.Payload]) error {
		for {
			p, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return st.Send(payload("Total", fmt.Sprint(total.Load())))
			}
			if err != nil {
				return err
			}
			total.Add(int64(len(p.GetBody().GetValue())))
		}
	}})
	ctx := testCtx(t)
	stream, err := pb.NewBiRequestStreamClient(dial(t, s.addr)).RequestBiStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	msg := payload("Data", strings.Repeat("d", size))
	for range n {
		if err := stream.Send(msg); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	p, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(p.GetBody().GetValue()), fmt.Sprint(n*size); got != want {
		t.Fatalf("server received %s bytes, want %s", got, want)
	}
}

func TestPercentEncodeAndTimeout(t *testing.T) {
	for in, want := range map[string]string{"plain": "plain", "50%": "50%25", "a\nb": "a%0Ab", "é": "%C3%A9"} {
		if got := percentEncode(in); got != want {
			t.Errorf("percentEncode(%q) = %q, want %q", in, got, want)
		}
	}
	for in, want := range map[string]time.Duration{"1S": time.Second, "250m": 250 * time.Millisecond, "3H": 3 * time.Hour, "99999999n": 99999999,
		"2562047H": 2562047 * time.Hour, "99999999H": math.MaxInt64} {
		if got, ok := parseTimeout(in); !ok || got != want {
			t.Errorf("parseTimeout(%q) = %v %v, want %v", in, got, ok, want)
		}
	}
	for _, bad := range []string{"", "S", "1", "1x", "123456789S", "-1S"} {
		if _, ok := parseTimeout(bad); ok {
			t.Errorf("parseTimeout(%q) accepted", bad)
		}
	}
	if !bytes.Equal([]byte(percentEncode(strings.Repeat("a", 10))), []byte(strings.Repeat("a", 10))) {
		t.Error("clean text changed")
	}
}

// waitFor polls cond until it holds; the test's own timeout bounds it.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// receive takes the next value from ch; the 30 s is a guard against a
// hung test, not a measurement.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatalf("gave up waiting for %s", what)
		var zero T
		return zero
	}
}

// The server's state, for the tests' waits.

func (s *Server) snapshot() []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

func (s *Server) activeStreams() int {
	n := 0
	for _, c := range s.snapshot() {
		c.mu.Lock()
		n += int(c.active)
		c.mu.Unlock()
	}
	return n
}

func (s *Server) windowWaiters() int {
	n := 0
	for _, c := range s.snapshot() {
		c.wmu.Lock()
		n += c.windowWaits
		c.wmu.Unlock()
	}
	return n
}

func (s *Server) allDraining() bool {
	for _, c := range s.snapshot() {
		c.mu.Lock()
		d := c.draining
		c.mu.Unlock()
		if !d {
			return false
		}
	}
	return true
}

func TestMaxCallDurationBoundsUnaryCallsOnly(t *testing.T) {
	type seen struct {
		deadline time.Time
		hasDL    bool
	}
	unary := make(chan seen, 1)
	stream := make(chan seen, 1)
	const bound = 5 * time.Second
	s := startServer(t, Config{MaxCallDuration: bound}, Handlers{
		Unary: func(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
			dl, ok := ctx.Deadline()
			unary <- seen{dl, ok}
			return echo(ctx, p)
		},
		Stream: func(st grpc.BidiStreamingServer[pb.Payload, pb.Payload]) error {
			dl, ok := st.Context().Deadline()
			stream <- seen{dl, ok}
			_, err := st.Recv()
			return err
		},
	})
	cc := dial(t, s.addr)
	client := pb.NewRequestClient(cc)
	call := func(ctx context.Context) (seen, time.Time, time.Time) {
		t.Helper()
		before := time.Now()
		if _, err := client.Request(ctx, payload("T", "x")); err != nil {
			t.Fatal(err)
		}
		return <-unary, before, time.Now()
	}

	// No grpc-timeout: the bound applies from the call's arrival.
	c, before, after := call(context.Background())
	if !c.hasDL || c.deadline.Before(before.Add(bound)) || c.deadline.After(after.Add(bound)) {
		t.Fatalf("call without a timeout: deadline %v (set %v), want %v after the call", c.deadline, c.hasDL, bound)
	}
	// A longer grpc-timeout is cut to the bound.
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	c, before, after = call(ctx)
	cancel()
	if !c.hasDL || c.deadline.Before(before.Add(bound)) || c.deadline.After(after.Add(bound)) {
		t.Fatalf("call with a longer timeout: deadline %v, want %v after the call", c.deadline, bound)
	}
	// A shorter one wins.
	const short = time.Second
	ctx, cancel = context.WithTimeout(context.Background(), short)
	c, _, after = call(ctx)
	cancel()
	if !c.hasDL || c.deadline.After(after.Add(short)) {
		t.Fatalf("call with a shorter timeout: deadline %v, want by %v", c.deadline, after.Add(short))
	}

	// A stream lives as long as the client keeps it: no bound.
	sctx, scancel := context.WithCancel(context.Background())
	defer scancel()
	st, err := pb.NewBiRequestStreamClient(cc).RequestBiStream(sctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Send(payload("T", "x")); err != nil {
		t.Fatal(err)
	}
	if c := <-stream; c.hasDL {
		t.Fatalf("stream has a deadline %v", c.deadline)
	}
	_ = st.CloseSend()
}
