package h2grpc

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/proto"

	"nacos-lockd/interop/testcerts"
	"nacos-lockd/protocol/pb"
)

// replyFromAnotherGoroutine is a handler that calls TryReply with
// "early"+body from a goroutine of its own, then returns "late"+body: the
// client sees which one was written. If wrote is not nil, it records under
// each body whether TryReply reported writing.
func replyFromAnotherGoroutine(t *testing.T, wrote *sync.Map, before func(ctx context.Context)) func(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
	return func(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
		body := string(p.GetBody().GetValue())
		if before != nil {
			before(ctx)
		}
		done := make(chan bool)
		go func() { done <- TryReply(ctx, payload("R", "early"+body)) }()
		w := <-done
		if w != Replied(ctx) {
			t.Errorf("TryReply reported %v, Replied %v", w, Replied(ctx))
		}
		if wrote != nil {
			wrote.Store(body, w)
		}
		return payload("R", "late"+body), nil
	}
}

// A response TryReply writes reaches the client in place of the
// handler's, and the connection goes on: HPACK state, stream accounting
// and later calls (many, also concurrent) are as after a normal response.
func TestTryReplyWritesTheResponseFromAnotherGoroutine(t *testing.T) {
	var wrote sync.Map
	s := startServer(t, Config{}, Handlers{Unary: replyFromAnotherGoroutine(t, &wrote, nil)})
	client := pb.NewRequestClient(dial(t, s.addr))
	ctx := testCtx(t)
	// call sends body and checks that the client got the early reply
	// exactly when TryReply reported writing it. TryReply declines
	// whenever the connection's write lock is held, by another call's
	// response or by the reader answering the client's BDP ping or
	// updating a window, so either reply may come; never both, never
	// neither, never another call's.
	call := func(body string) (early bool, err error) {
		r, err := client.Request(ctx, payload("T", body))
		if err != nil {
			return false, err
		}
		// An early reply can reach the client before its handler records
		// it; a late one cannot.
		w, ok := wrote.Load(body)
		for deadline := time.Now().Add(5 * time.Second); !ok && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
			w, ok = wrote.Load(body)
		}
		if !ok {
			return false, fmt.Errorf("call %.20q answered without the handler's record", body)
		}
		got := string(r.GetBody().GetValue())
		want := "late" + body
		if w.(bool) {
			want = "early" + body
		}
		if got != want {
			return false, fmt.Errorf("call %.20q answered %.30q, want %.30q", body, got, want)
		}
		return w.(bool), nil
	}
	earlies := 0
	for i := range 50 {
		early, err := call(fmt.Sprintf("%02d", i) + strings.Repeat("x", i*50))
		if err != nil {
			t.Fatal(err)
		}
		if early {
			earlies++
		}
	}
	if earlies == 0 {
		t.Fatal("no sequential call was answered by TryReply")
	}
	errs := make(chan error, 8)
	for i := range 8 {
		go func() {
			_, err := call(fmt.Sprintf("c%d", i))
			errs <- err
		}()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent call: %v", err)
		}
	}
	if _, err := call("after"); err != nil {
		t.Fatalf("the call after the concurrent ones: %v", err)
	}
}

// TryReply writes nothing where it would have to wait or cannot write
// part of a message: the write lock held by another writer, a message
// larger than the client's window, a TLS connection, or a context that is
// not the handler's own. The handler's response is then the one the
// client gets.
func TestTryReplyDeclinesWhatWouldWait(t *testing.T) {
	ctx := testCtx(t)
	t.Run("write lock held", func(t *testing.T) {
		s := startServer(t, Config{}, Handlers{Unary: replyFromAnotherGoroutine(t, nil, func(ctx context.Context) {
			c := ctx.(*callCtx).st.c
			c.wmu.Lock()
			go func() { time.Sleep(50 * time.Millisecond); c.wmu.Unlock() }()
		})})
		expectLate(ctx, t, s.addr, "held")
	})
	t.Run("larger than a frame and the window", func(t *testing.T) {
		s := startServer(t, Config{}, Handlers{Unary: replyFromAnotherGoroutine(t, nil, nil)})
		expectLate(ctx, t, s.addr, strings.Repeat("w", 70000)) // the stream window is 65535
	})
	t.Run("derived context", func(t *testing.T) {
		s := startServer(t, Config{}, Handlers{Unary: func(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
			vctx := context.WithValue(ctx, struct{}{}, 1)
			if CanTryReply(vctx) || TryReply(vctx, payload("R", "early")) {
				t.Error("TryReply wrote through a derived context")
			}
			return payload("R", "late"+string(p.GetBody().GetValue())), nil
		}})
		expectLate(ctx, t, s.addr, "d")
	})
	t.Run("tls", func(t *testing.T) {
		certs, err := testcerts.Generate(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		s := startServer(t, Config{TLS: &tls.Config{Certificates: []tls.Certificate{certs.Server}, MinVersion: tls.VersionTLS12}},
			Handlers{Unary: replyFromAnotherGoroutine(t, nil, nil)})
		creds := credentials.NewTLS(&tls.Config{RootCAs: certs.CAPool})
		expectLate(ctx, t, s.addr, "tls", grpc.WithTransportCredentials(creds))
	})
}

func expectLate(ctx context.Context, t *testing.T, addr, body string, opts ...grpc.DialOption) {
	t.Helper()
	r, err := pb.NewRequestClient(dial(t, addr, opts...)).Request(ctx, payload("T", body))
	if err != nil {
		t.Fatal(err)
	}
	if got := string(r.GetBody().GetValue()); got != "late"+body {
		t.Fatalf("answered %.20q..., want the handler's response", got)
	}
}

// A write in try mode never waits: what a full socket does not take is
// kept, and goes out, in order, ahead of the next write.
func TestSockWriterKeepsWhatTheSocketDoesNotTake(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	peer, err := net.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	nc, err := lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	tc := nc.(*net.TCPConn)
	if err := tc.SetWriteBuffer(4096); err != nil {
		t.Fatal(err)
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	w := &sockWriter{w: nc, raw: raw}
	var sent bytes.Buffer
	chunk := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 64<<10) }
	// The peer reads nothing yet: the socket's buffers fill.
	w.try = true
	// A write that waited would hang here, the peer not reading.
	for i := 0; len(w.spill) == 0; i++ {
		if i == 1000 {
			t.Fatal("64 MiB written without the socket ever refusing")
		}
		b := chunk(i)
		if n, err := w.Write(b); err != nil || n != len(b) {
			t.Fatalf("try write: %d %v", n, err)
		}
		sent.Write(b)
	}
	w.try = false
	got := make(chan []byte)
	go func() {
		b, _ := io.ReadAll(peer)
		got <- b
	}()
	last := []byte("the end")
	if _, err := w.Write(last); err != nil {
		t.Fatal(err)
	}
	sent.Write(last)
	if len(w.spill) != 0 {
		t.Fatalf("%d bytes still kept after a write that waits", len(w.spill))
	}
	nc.Close()
	if b := <-got; !bytes.Equal(b, sent.Bytes()) {
		t.Fatalf("the peer read %d bytes, not the %d written in order", len(b), sent.Len())
	}
}

// smallSendBuffers accepts connections whose send buffer is 4 KiB, so that
// a large response fills it.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if err := nc.(*net.TCPConn).SetWriteBuffer(4096); err != nil {
		nc.Close()
		return nil, err
	}
	return tagConn{nc, &tagAddr{nc.RemoteAddr(), 1}}, nil
}

// What TryReply leaves for a full socket goes out by itself once the
// client reads (sendSpill), with no later write on the connection to
// carry it: the client gets the whole response, the call's end included.
func TestTryReplySendsWhatTheSocketRefusedWithoutALaterWrite(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("s", 256<<10) // far beyond both sockets' buffers
	wrote := make(chan bool, 1)
	srv := NewServer(Config{Log: zerolog.Nop()}, Handlers{Unary: func(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
		done := make(chan bool)
		go func() { done <- TryReply(ctx, payload("R", body)) }()
		wrote <- <-done
		return payload("R", "late"), nil
	}})
	served := make(chan error, 1)
	go func() { served <- srv.Serve(smallSendBuffers{lis}) }()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})

	// A client whose receive buffer is small, that reads nothing until
	// the response has been written, and allows frames and windows large
	// enough for the response to go in one DATA frame.
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		}); err != nil {
			return err
		}
		return serr
	}}
	nc, err := d.Dial("tcp", lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := rawOn(t, nc)
	r.fr.SetMaxReadFrameSize(1 << 20)
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	if err := r.fr.WriteSettings(
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20},
		http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 20},
	); err != nil {
		t.Fatal(err)
	}
	if err := r.fr.WriteWindowUpdate(0, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := r.request(1, "go"); err != nil {
		t.Fatal(err)
	}
	// TryReply must return with the client reading nothing: the response
	// is far larger than the bufio writer, so it reaches the socket in
	// several writes, and none may wait for the one before.
	select {
	case w := <-wrote:
		if !w {
			t.Fatal("TryReply declined the response")
		}
	case <-time.After(20 * time.Second):
		t.Fatal("TryReply waited for a client that reads nothing")
	}

	var data []byte
	grpcStatus := ""
	ended := r.until(func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if !f.IsAck() {
				_ = r.fr.WriteSettingsAck()
			}
		case *http2.DataFrame:
			if f.StreamID == 1 {
				data = append(data, f.Data()...)
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 && f.StreamEnded() {
				grpcStatus = headerValue(f, "grpc-status") // in the trailers, which end the call
				return true
			}
		}
		return false
	})
	if !ended {
		t.Fatalf("the call did not end: %d bytes of its response arrived", len(data))
	}
	if grpcStatus != "0" {
		t.Fatalf("the call ended with grpc-status %q, want 0", grpcStatus)
	}
	var got pb.Payload
	if len(data) < 5 || proto.Unmarshal(data[5:], &got) != nil {
		t.Fatalf("response of %d bytes does not decode", len(data))
	}
	if string(got.GetBody().GetValue()) != body {
		t.Fatalf("response body %d bytes, want the early reply's %d", len(got.GetBody().GetValue()), len(body))
	}
}

func headerValue(f *http2.MetaHeadersFrame, name string) string {
	for _, h := range f.RegularFields() {
		if h.Name == name {
			return h.Value
		}
	}
	return ""
}
