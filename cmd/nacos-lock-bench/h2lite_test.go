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
	l, err := dialNoop(lis.Addr().String())(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	n := l.(*noopLocker)
	for i := 0; i < 2000; i++ { // past the 64 KiB windows both ways
		if err := n.call(ctx); err != nil {
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
	if err := n.call(ctx); err != nil {
		t.Fatalf("call after an error: %v", err)
	}
}
