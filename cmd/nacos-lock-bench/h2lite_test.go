package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"nacos-lockd/protocol"
	"nacos-lockd/protocol/pb"
)

// The lean server must carry grpc-go's client through many unary calls on
// one connection, replies larger than a frame and than the initial flow
// control window, and a handler error, or its figures would not be the
// wire's.
func TestH2LiteServesGRPCGoClient(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	reply, err := protocol.Encode(&protocol.HealthCheckResponse{ResponseBase: protocol.Success()})
	if err != nil {
		t.Fatal(err)
	}
	blob := bytes.Repeat([]byte("x"), 200<<10)
	go serveH2Lite(lis, func(req []byte) ([]byte, error) {
		var in pb.Payload
		if err := proto.Unmarshal(req, &in); err != nil {
			return nil, err
		}
		switch in.GetMetadata().GetType() {
		case "Big":
			return proto.Marshal(&pb.Payload{Body: &anypb.Any{Value: blob}})
		case "Fail":
			return nil, errors.New("asked to fail")
		}
		return proto.Marshal(reply)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := dialNoop(lis.Addr().String(), 30000)(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := l.(*noopLocker)
	for i := 0; i < 2000; i++ { // past the 64 KiB windows both ways
		if _, err := n.call(ctx, &protocol.HealthCheckRequest{}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	for i := 0; i < 3; i++ {
		out, err := n.req.Request(ctx, &pb.Payload{Metadata: &pb.Metadata{Type: "Big"}})
		if err != nil {
			t.Fatalf("big reply %d: %v", i, err)
		}
		if !bytes.Equal(out.GetBody().GetValue(), blob) {
			t.Fatalf("big reply %d: %d bytes, want %d", i, len(out.GetBody().GetValue()), len(blob))
		}
	}
	if _, err := n.req.Request(ctx, &pb.Payload{Metadata: &pb.Metadata{Type: "Fail"}}); status.Code(err) != 13 {
		t.Fatalf("handler error: got %v, want code 13 (Internal)", err)
	}
	if _, err := n.call(ctx, &protocol.HealthCheckRequest{}); err != nil {
		t.Fatalf("call after an error: %v", err)
	}
}

// serve-noop serves the grpc-noop client on each of its transports
// (grpc-go: the grpc-noop floor; h2grpc, nacos-lockd's own: the
// h2grpc-noop floor; h2lite), answering a W1 pair as the lock server
// answers one and the dial's health check with a HealthCheckResponse; an
// unknown transport is refused, and the floor, like grpc-noop, has no W2.
func TestServeNoopAnswersLockPairs(t *testing.T) {
	for _, transport := range []string{"grpc-go", "h2grpc", "h2lite"} {
		t.Run(transport, func(t *testing.T) { serveNoopAnswersLockPairs(t, transport) })
	}
	var out bytes.Buffer
	if err := dispatch(context.Background(), []string{"serve-noop", "--addr", "127.0.0.1:0", "--transport", "h3"}, &out, &out); err == nil {
		t.Error("an unknown transport was accepted")
	}
	if ok, _ := supports("h2grpc-noop", "w2"); ok {
		t.Error("h2grpc-noop runs W2")
	}
}

func serveNoopAnswersLockPairs(t *testing.T, transport string) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	var out bytes.Buffer
	go func() {
		served <- dispatch(ctx, []string{"serve-noop", "--addr", addr, "--transport", transport}, &out, &out)
	}()
	dctx, dcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer dcancel()
	var l interface{ Close() error }
	for l == nil {
		if c, err := dialNoop(addr, 30000)(dctx, 0); err == nil {
			l = c
		} else if dctx.Err() != nil {
			t.Fatalf("dial: %v", err)
		} else {
			time.Sleep(20 * time.Millisecond)
		}
	}
	n := l.(*noopLocker)
	// A W1 pair is answered as the lock server answers one: an ACQUIRE
	// and a RELEASE, each with a granting LockOperationResponse.
	for i := 0; i < 100; i++ {
		if _, err := n.Acquire(dctx, "k", false); err != nil {
			t.Fatalf("acquire %d: %v", i, err)
		}
		if err := n.Release(dctx, "k"); err != nil {
			t.Fatalf("release %d: %v", i, err)
		}
	}
	p, err := n.req.Request(dctx, &pb.Payload{Metadata: &pb.Metadata{Type: "HealthCheckRequest"}})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := protocol.Decode(p); err != nil {
		t.Fatal(err)
	} else if _, ok := m.(*protocol.HealthCheckResponse); !ok {
		t.Fatalf("reply %T, want the prepared HealthCheckResponse", m)
	}
	l.Close()
	cancel()
	// h2lite, a measuring instrument, ends with its listener's error.
	if err := <-served; err != nil && !(transport == "h2lite" && errors.Is(err, net.ErrClosed)) {
		t.Errorf("serve-noop stopped with %v", err)
	}
}
