package h2grpc

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"nacos-lockd/protocol/pb"
)

// A PING ACK waits for the next response and goes out behind it, in the
// same write; with no response to carry it, it goes out within about two
// ackHold periods; and two pings are acknowledged in their order.
func TestPingAckRidesBehindTheNextResponse(t *testing.T) {
	s := startServer(t, Config{}, Handlers{})
	r := newRaw(t, s.addr, true)
	// Settle the handshake: the server's SETTINGS and our SETTINGS' ACK.
	if err := r.fr.WritePing(false, [8]byte{'s'}); err != nil {
		t.Fatal(err)
	}
	if !r.until(func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && p.IsAck() }) {
		t.Fatal("first ping not acknowledged")
	}

	// With nothing to carry it, the sweeper sends the ACK.
	start := time.Now()
	if err := r.fr.WritePing(false, [8]byte{'a'}); err != nil {
		t.Fatal(err)
	}
	if !r.until(func(f http2.Frame) bool {
		p, ok := f.(*http2.PingFrame)
		return ok && p.IsAck() && p.Data == [8]byte{'a'}
	}) {
		t.Fatal("a ping with no response to ride on was never acknowledged")
	}
	if d := time.Since(start); d > 10*ackHold {
		t.Fatalf("a lone ACK took %v ", d)
	}

	// A ping, then a call: the call's response comes first, its ACK right
	// behind it.
	if err := r.fr.WritePing(false, [8]byte{'b'}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ackHold / 4) // the server has read the ping and holds its ACK
	if err := r.request(1, "x"); err != nil {
		t.Fatal(err)
	}
	var order []string
	for len(order) < 2 {
		f, err := r.fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				order = append(order, "response")
			}
		case *http2.PingFrame:
			if f.IsAck() {
				order = append(order, "ack "+string(f.Data[:1]))
			}
		}
	}
	if order[0] != "response" || order[1] != "ack b" {
		t.Fatalf("frames in the order %v, want the response, then ack b", order)
	}

	// Two pings before any response: both acknowledged, in order.
	for _, b := range []byte{'c', 'd'} {
		if err := r.fr.WritePing(false, [8]byte{b}); err != nil {
			t.Fatal(err)
		}
	}
	var acks []byte
	for len(acks) < 2 {
		f, err := r.fr.ReadFrame()
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := f.(*http2.PingFrame); ok && p.IsAck() {
			acks = append(acks, p.Data[0])
		}
	}
	if string(acks) != "cd" {
		t.Fatalf("ACKs %q, want \"cd\"", acks)
	}
}

// grpc-go's client pings after every response. Calls spaced out, so that
// none is in flight when its ping arrives, cost the server one write each:
// the ACK waits for the next response instead of a write of its own.
func TestSpacedCallsCostOneWriteEach(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int64
	s := NewServer(Config{}, Handlers{Unary: echo})
	go func() { _ = s.Serve(countingListener{lis, &writes}) }()
	defer s.Stop()
	cc, err := grpc.NewClient("passthrough:///"+lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	client := pb.NewRequestClient(cc)
	req := payload("T", "lock-sized request body")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := client.Request(ctx, req); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * ackHold)
	writes.Store(0)
	const calls = 100
	for range calls {
		time.Sleep(time.Millisecond) // the client's ping arrives while no call is in flight
		if _, err := client.Request(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	if w := writes.Load(); w > calls*11/10 {
		t.Fatalf("%d server writes for %d spaced calls, want about one each", w, calls)
	}
}

// A connection that closes while it holds an ACK, and one whose ACK a
// response carried, leave the held set empty, and the sweeper ends.
func TestHeldAcksLeaveNothingBehind(t *testing.T) {
	s := startServer(t, Config{}, Handlers{})
	carried := newRaw(t, s.addr, true)
	if err := carried.fr.WritePing(false, [8]byte{'c'}); err != nil {
		t.Fatal(err)
	}
	if err := carried.request(1, "x"); err != nil {
		t.Fatal(err)
	}
	if !carried.until(func(f http2.Frame) bool {
		p, ok := f.(*http2.PingFrame)
		return ok && p.IsAck() && p.Data == [8]byte{'c'}
	}) {
		t.Fatal("ping not acknowledged")
	}
	closed := newRaw(t, s.addr, true)
	if err := closed.fr.WritePing(false, [8]byte{'x'}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ackHold / 4)
	closed.nc.Close()
	deadline := time.Now().Add(20 * ackHold)
	for {
		s.ackMu.Lock()
		n, running := len(s.held), s.sweeping
		s.ackMu.Unlock()
		if n == 0 && !running {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %d connections still held, sweeper running %v", 20*ackHold, n, running)
		}
		time.Sleep(ackHold / 2)
	}
}
