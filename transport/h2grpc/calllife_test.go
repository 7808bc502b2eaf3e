package h2grpc

import (
	"context"
	"errors"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"nacos-lockd/protocol/pb"
)

// TestServerEndsCallsAtTheirDeadlines: the server itself ends a call
// whose grpc-timeout passes (the raw client never cancels), in deadline
// order whatever the order the calls came in, and a call still running
// when its connection closes ends as cancelled.
func TestServerEndsCallsAtTheirDeadlines(t *testing.T) {
	type ended struct {
		body string
		err  error
	}
	endings := make(chan ended, 4)
	running := make(chan string, 4)
	s := startServer(t, Config{}, Handlers{Unary: func(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
		body := string(p.GetBody().GetValue())
		running <- body
		<-ctx.Done()
		endings <- ended{body, ctx.Err()}
		return nil, ctx.Err()
	}})
	r := newRaw(t, s.addr, true)
	call := func(id uint32, body, timeout string) {
		t.Helper()
		if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true,
			BlockFragment: r.block(hpack.HeaderField{Name: "grpc-timeout", Value: timeout})}); err != nil {
			t.Fatal(err)
		}
		if err := r.fr.WriteData(id, true, grpcMessage(payload("T", body))); err != nil {
			t.Fatal(err)
		}
		receive(t, running, "call "+body+" to reach its handler")
	}
	// The latest deadline first: the server must bring its timer forward
	// for each later call with an earlier deadline.
	call(1, "an hour", "1H")
	call(3, "900 ms", "900m")
	call(5, "300 ms", "300m")
	next := func() ended { t.Helper(); return receive(t, endings, "a call to end") }
	for _, want := range []string{"300 ms", "900 ms"} {
		if e := next(); e.body != want || !errors.Is(e.err, context.DeadlineExceeded) {
			t.Fatalf("ended %q with %v, want %q with the deadline passed", e.body, e.err, want)
		}
	}
	// A call made after the timer has fired is still watched.
	call(7, "200 ms", "200m")
	if e := next(); e.body != "200 ms" || !errors.Is(e.err, context.DeadlineExceeded) {
		t.Fatalf("ended %q with %v, want the later 200 ms call with the deadline passed", e.body, e.err)
	}
	r.nc.Close()
	if e := next(); e.body != "an hour" || !errors.Is(e.err, context.Canceled) {
		t.Fatalf("ended %q with %v, want the hour-long call cancelled by its connection's close", e.body, e.err)
	}
}

// TestDeadlineEndsAWriteWaitingForWindow: an answer that waits for a
// client to grant window is given up when the call's deadline passes,
// and the client is told at once (RST_STREAM CANCEL), not with whatever
// the connection writes next.
func TestDeadlineEndsAWriteWaitingForWindow(t *testing.T) {
	s := startServer(t, Config{}, Handlers{}) // echo: the answer is as big as the request
	r := newRaw(t, s.addr, false)
	if _, err := r.nc.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	// 1 KiB of stream window, never raised: a 4 KiB answer cannot finish.
	if err := r.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 10}); err != nil {
		t.Fatal(err)
	}
	if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true,
		BlockFragment: r.block(hpack.HeaderField{Name: "grpc-timeout", Value: "500m"})}); err != nil {
		t.Fatal(err)
	}
	if err := r.fr.WriteData(1, true, grpcMessage(payload("T", string(make([]byte, 4<<10))))); err != nil {
		t.Fatal(err)
	}
	var code http2.ErrCode
	if !r.until(func(f http2.Frame) bool {
		if rst, ok := f.(*http2.RSTStreamFrame); ok && rst.StreamID == 1 {
			code = rst.ErrCode
			return true
		}
		if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
			_ = r.fr.WriteSettingsAck()
		}
		return false
	}) {
		t.Fatal("the connection ended without the stream's RST_STREAM")
	}
	if code != http2.ErrCodeCancel {
		t.Fatalf("RST_STREAM %v, want CANCEL", code)
	}
	waitFor(t, "the writer to stop waiting for window", func() bool { return s.windowWaiters() == 0 })
}
