package h2grpc

import (
	"context"
	"errors"
	"io"
	"net"
	"reflect"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"nacos-lockd/protocol/pb"
)

// seenCall is what a handler found in its context.
type seenCall struct {
	md                           metadata.MD
	method                       string
	setHeader, sendHeader, trail error
	emptySetHeader               error
}

func inspect(ctx context.Context) seenCall {
	md, _ := metadata.FromIncomingContext(ctx)
	m, _ := grpc.Method(ctx)
	return seenCall{
		md: md, method: m,
		setHeader:      grpc.SetHeader(ctx, metadata.Pairs("x-reply", "1")),
		sendHeader:     grpc.SendHeader(ctx, metadata.Pairs("x-reply", "1")),
		trail:          grpc.SetTrailer(ctx, metadata.Pairs("x-reply", "1")),
		emptySetHeader: grpc.SetHeader(ctx, nil),
	}
}

type inspectServer struct {
	pb.UnimplementedRequestServer
	seen chan seenCall
}

func (s inspectServer) Request(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	s.seen <- seenCall{md: md}
	return echo(ctx, p)
}

// TestIncomingMetadataAsGRPCGo: a handler reads the same incoming
// metadata on h2grpc as on grpc-go's server, for the same client call.
func TestIncomingMetadataAsGRPCGo(t *testing.T) {
	seen := make(chan seenCall, 4)
	h2 := startServer(t, Config{}, Handlers{Unary: func(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
		seen <- inspect(ctx)
		return echo(ctx, p)
	}})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	ref := make(chan seenCall, 4)
	pb.RegisterRequestServer(gs, inspectServer{seen: ref})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)

	call := func(addr string) {
		t.Helper()
		ctx := metadata.AppendToOutgoingContext(testCtx(t),
			"x-trace", "abc", "x-trace", "def", "x-id-bin", "\x00\x01\xfe", "x-empty", "")
		if _, err := pb.NewRequestClient(dial(t, addr)).Request(ctx, payload("T", "md")); err != nil {
			t.Fatal(err)
		}
	}
	call(h2.addr)
	call(lis.Addr().String())
	got, want := <-seen, <-ref
	// The clients are two: only :authority (the address dialled) differs.
	if a := got.md[":authority"]; len(a) != 1 || a[0] != h2.addr {
		t.Errorf(":authority %q, want %q", a, h2.addr)
	}
	delete(got.md, ":authority")
	delete(want.md, ":authority")
	if !reflect.DeepEqual(got.md, want.md) {
		t.Errorf("incoming metadata on h2grpc\n%v\nwant (grpc-go's server)\n%v", got.md, want.md)
	}
	if v := got.md["x-id-bin"]; len(v) != 1 || v[0] != "\x00\x01\xfe" {
		t.Errorf("x-id-bin %q, want it decoded", v)
	}
	if got.method != UnaryMethod {
		t.Errorf("grpc.Method %q, want %q", got.method, UnaryMethod)
	}
	// Response metadata is refused clearly; none is no error.
	for name, err := range map[string]error{"SetHeader": got.setHeader, "SendHeader": got.sendHeader, "SetTrailer": got.trail} {
		if status.Code(err) != codes.Unimplemented || !strings.Contains(err.Error(), "not supported") {
			t.Errorf("grpc.%s: %v, want Unimplemented, not supported", name, err)
		}
	}
	if got.emptySetHeader != nil {
		t.Errorf("grpc.SetHeader of nothing: %v", got.emptySetHeader)
	}
}

func TestStreamContextCarriesMetadata(t *testing.T) {
	type result struct {
		md         metadata.MD
		method     string
		set, send  error
		emptyStill error
	}
	res := make(chan result, 1)
	s := startServer(t, Config{}, Handlers{Stream: func(st grpc.BidiStreamingServer[pb.Payload, pb.Payload]) error {
		md, _ := metadata.FromIncomingContext(st.Context())
		m, _ := grpc.Method(st.Context())
		r := result{md: md, method: m, set: st.SetHeader(metadata.Pairs("a", "b")), send: st.SendHeader(metadata.Pairs("a", "b"))}
		st.SetTrailer(metadata.Pairs("a", "b")) // dropped, as documented
		r.emptyStill = st.SendHeader(nil)
		res <- r
		for {
			if _, err := st.Recv(); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		}
	}})
	ctx := metadata.AppendToOutgoingContext(testCtx(t), "x-conn", "c1")
	stream, err := pb.NewBiRequestStreamClient(dial(t, s.addr)).RequestBiStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r := <-res
	if v := r.md.Get("x-conn"); len(v) != 1 || v[0] != "c1" {
		t.Errorf("stream metadata %v, want x-conn c1", r.md)
	}
	if r.method != StreamMethod {
		t.Errorf("grpc.Method %q", r.method)
	}
	if status.Code(r.set) != codes.Unimplemented || status.Code(r.send) != codes.Unimplemented || r.emptyStill != nil {
		t.Errorf("SetHeader %v, SendHeader %v, SendHeader(nil) %v", r.set, r.send, r.emptyStill)
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("end of stream: %v", err)
	}
}

func TestMetadataFields(t *testing.T) {
	var m mdFields
	for _, f := range [][2]string{{"host", "h"}, {"a", "1"}, {"b-bin", "AAE"}, {"a", "2"}, {"c", "3"}, {"d", "4"}, {"e", "5"}, {"f", "6"}} {
		m.add(f[0], f[1])
	}
	want := metadata.MD{":authority": {"h"}, "a": {"1", "2"}, "b-bin": {"\x00\x01"}, "c": {"3"}, "d": {"4"}, "e": {"5"}, "f": {"6"}}
	if got := m.build(); !reflect.DeepEqual(got, want) {
		t.Fatalf("build %v, want %v", got, want)
	}
	m.add(":authority", "x")
	if got := m.build()[":authority"]; len(got) != 1 || got[0] != "x" {
		t.Fatalf(":authority with host: %v", got)
	}
	for v, ok := range map[string]bool{"": true, "AAE": true, "AAEC": true, "AA==": true, "AAE=": true, "A": false, "AA=": false, "A=AA": false, "!!!!": false, "AA===": false} {
		if validBinValue(v) != ok {
			t.Errorf("validBinValue(%q) = %v", v, !ok)
		}
	}
}

// TestNoMetadataNoCost: a call whose handler never asks for its
// metadata builds none.
func TestNoMetadataNoCost(t *testing.T) {
	var mu sync.Mutex
	var streams []*stream
	s := startServer(t, Config{}, Handlers{Unary: func(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
		mu.Lock()
		streams = append(streams, ctx.(*callCtx).st)
		mu.Unlock()
		return echo(ctx, p)
	}})
	serves(t, s)
	mu.Lock()
	defer mu.Unlock()
	if len(streams) != 1 || streams[0].inMD.md != nil {
		t.Fatalf("metadata built for a handler that did not ask")
	}
}

func TestHostileBadBinaryMetadata(t *testing.T) {
	s := startServer(t, Config{}, Handlers{})
	r := newRaw(t, s.addr, true)
	if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, EndHeaders: true, BlockFragment: r.block(hpack.HeaderField{Name: "x-id-bin", Value: "!not base64!"})}); err != nil {
		t.Fatal(err)
	}
	var httpStatus, grpcStatus string
	if !r.until(func(f http2.Frame) bool {
		h, ok := f.(*http2.MetaHeadersFrame)
		if ok && h.StreamID == 1 {
			httpStatus = h.PseudoValue("status")
			for _, hf := range h.RegularFields() {
				if hf.Name == "grpc-status" {
					grpcStatus = hf.Value
				}
			}
		}
		return ok
	}) || httpStatus != "400" || grpcStatus != "13" {
		t.Fatalf("bad -bin value: :status %q grpc-status %q, want 400 and 13 (INTERNAL), as grpc-go", httpStatus, grpcStatus)
	}
	if !r.echoes(3, "after bad bin") {
		t.Fatal("the connection does not serve after the refused call")
	}
}

func TestNoFieldsNoMetadata(t *testing.T) {
	st := &stream{}
	st.hctx = callCtx{context.Background(), st}
	if md, ok := metadata.FromIncomingContext(&st.hctx); ok || md != nil {
		t.Fatalf("a request without metadata fields: %v %v, want none (as grpc-go)", md, ok)
	}
	st.md.add("x-a", "1")
	if md, ok := metadata.FromIncomingContext(&st.hctx); !ok || md.Get("x-a")[0] != "1" {
		t.Fatalf("metadata %v %v", md, ok)
	}
}
