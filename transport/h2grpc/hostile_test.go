package h2grpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/protobuf/proto"

	"nacos-lockd/protocol/pb"
)

// rawClient speaks HTTP/2 frame by frame, to send what no real client
// would.
type rawClient struct {
	t    *testing.T
	nc   net.Conn
	fr   *http2.Framer
	enc  *hpack.Encoder
	hbuf bytes.Buffer
}

func newRaw(t *testing.T, addr string, preface bool) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := rawOn(t, nc)
	if preface {
		if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
			t.Fatal(err)
		}
		if err := r.fr.WriteSettings(); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// rawOn is a rawClient on nc, which it closes when the test ends; it
// sends nothing.
func rawOn(t *testing.T, nc net.Conn) *rawClient {
	t.Cleanup(func() { nc.Close() })
	_ = nc.SetDeadline(time.Now().Add(30 * time.Second))
	r := &rawClient{t: t, nc: nc, fr: http2.NewFramer(nc, nc)}
	r.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	r.fr.MaxHeaderListSize = 1 << 20
	r.enc = hpack.NewEncoder(&r.hbuf)
	return r
}

func (r *rawClient) block(extra ...hpack.HeaderField) []byte {
	r.hbuf.Reset()
	for _, f := range append([]hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: UnaryMethod}, {Name: ":authority", Value: "x"},
		{Name: "content-type", Value: "application/grpc"},
	}, extra...) {
		_ = r.enc.WriteField(f)
	}
	return bytes.Clone(r.hbuf.Bytes())
}

func grpcMessage(p *pb.Payload) []byte {
	b, _ := proto.Marshal(p)
	out := make([]byte, 5, 5+len(b))
	binary.BigEndian.PutUint32(out[1:], uint32(len(b)))
	return append(out, b...)
}

// request sends a whole unary call on stream id.
func (r *rawClient) request(id uint32, body string) error {
	if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.block(), EndHeaders: true}); err != nil {
		return err
	}
	return r.fr.WriteData(id, true, grpcMessage(payload("T", body)))
}

// until reads frames until want returns true for one, or the connection
// ends (false).
func (r *rawClient) until(want func(http2.Frame) bool) bool {
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			return false
		}
		if want(f) {
			return true
		}
	}
}

// goAway reads until the server's GOAWAY and returns its code and debug
// text; ok is false if the connection ended without one.
func (r *rawClient) goAway() (code http2.ErrCode, debug string, ok bool) {
	ok = r.until(func(f http2.Frame) bool {
		if g, is := f.(*http2.GoAwayFrame); is {
			code, debug = g.ErrCode, string(g.DebugData())
			return true
		}
		return false
	})
	return code, debug, ok
}

func (r *rawClient) closed() bool {
	return !r.until(func(http2.Frame) bool { return false })
}

// serves checks the server still answers a real client.
func serves(t *testing.T, s *testServer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := pb.NewRequestClient(dial(t, s.addr)).Request(ctx, payload("T", "still here"))
	if err != nil || string(r.GetBody().GetValue()) != "still here" {
		t.Fatalf("server after hostile client: %v %v", r, err)
	}
}

func TestHostileBadPreface(t *testing.T) {
	errs := make(chan string, 4)
	s := startServer(t, Config{ConnError: func(code string) { errs <- code }}, Handlers{})
	r := newRaw(t, s.addr, false)
	if _, err := r.nc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if code, _, ok := r.goAway(); !ok || code != http2.ErrCodeProtocol {
		t.Fatalf("bad preface: GOAWAY %v (%v), want PROTOCOL_ERROR", code, ok)
	}
	if !r.closed() {
		t.Fatal("connection left open after a bad preface")
	}
	serves(t, s)
	if !strings.Contains(s.logs.String(), "bad client preface") {
		t.Fatalf("no log line for the bad preface: %s", s.logs)
	}
	if code := <-errs; code != "PROTOCOL_ERROR" {
		t.Fatalf("ConnError got %q, want PROTOCOL_ERROR", code)
	}
}

func TestHostileHeaderListTooLarge(t *testing.T) {
	s := startServer(t, Config{MaxHeaderListSize: 4 << 10}, Handlers{})
	r := newRaw(t, s.addr, true)
	// Over the limit in many small headers: the stream fails, the
	// connection stays and serves the next call.
	var many []hpack.HeaderField
	for i := range 6 {
		many = append(many, hpack.HeaderField{Name: fmt.Sprintf("x-big-%d", i), Value: strings.Repeat("b", 1<<10)})
	}
	big := r.block(many...)
	if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: big, EndHeaders: true, EndStream: true}); err != nil {
		t.Fatal(err)
	}
	var status string
	if !r.until(func(f http2.Frame) bool {
		if h, ok := f.(*http2.MetaHeadersFrame); ok && h.StreamID == 1 {
			status = h.PseudoValue("status")
			return true
		}
		return false
	}) || status != "431" {
		t.Fatalf("oversized header list: status %q, want 431", status)
	}
	if err := r.request(3, "next"); err != nil {
		t.Fatal(err)
	}
	var body []byte
	if !r.until(func(f http2.Frame) bool {
		if d, ok := f.(*http2.DataFrame); ok && d.StreamID == 3 {
			body = bytes.Clone(d.Data())
			return true
		}
		return false
	}) || !bytes.Contains(body, []byte("next")) {
		t.Fatalf("call after the refused one: %q", body)
	}
	// Far over the limit, across CONTINUATION frames: the connection goes
	// (as it does for one header larger than the whole limit).
	huge := r.block(hpack.HeaderField{Name: "x-huge", Value: strings.Repeat("h", 40<<10)})
	go func() {
		_ = r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: huge[:16000]})
		for rest := huge[16000:]; len(rest) > 0; {
			n := min(len(rest), 16000)
			if r.fr.WriteContinuation(5, n == len(rest), rest[:n]) != nil {
				return
			}
			rest = rest[n:]
		}
	}()
	if code, _, ok := r.goAway(); !ok || (code != http2.ErrCodeEnhanceYourCalm && code != http2.ErrCodeCompression) {
		t.Fatalf("huge header list: GOAWAY %v (%v), want ENHANCE_YOUR_CALM or COMPRESSION_ERROR", code, ok)
	}
	serves(t, s)
}

func TestHostileContinuationFlood(t *testing.T) {
	s := startServer(t, Config{}, Handlers{})
	r := newRaw(t, s.addr, true)
	// HEADERS that never end: a stream of CONTINUATION frames carrying one
	// endless header value.
	go func() {
		r.hbuf.Reset()
		_ = r.enc.WriteField(hpack.HeaderField{Name: ":method", Value: "POST"})
		if r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.hbuf.Bytes()}) != nil {
			return
		}
		frag := bytes.Repeat([]byte{'c'}, 16000)
		for range 10000 {
			if r.fr.WriteContinuation(1, false, frag) != nil {
				return
			}
		}
	}()
	if code, _, ok := r.goAway(); !ok || code != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("CONTINUATION flood: GOAWAY %v (%v), want ENHANCE_YOUR_CALM", code, ok)
	}
	if !r.closed() {
		t.Fatal("connection left open")
	}
	serves(t, s)
}

func TestHostilePingFlood(t *testing.T) {
	s := startServer(t, Config{}, Handlers{})
	r := newRaw(t, s.addr, true)
	go func() {
		for i := range 1000 {
			if r.fr.WritePing(false, [8]byte{byte(i)}) != nil {
				return
			}
		}
	}()
	code, debug, ok := r.goAway()
	if !ok || code != http2.ErrCodeEnhanceYourCalm || debug != "too_many_pings" {
		t.Fatalf("ping flood: GOAWAY %v %q (%v), want ENHANCE_YOUR_CALM too_many_pings", code, debug, ok)
	}
	if !r.closed() {
		t.Fatal("connection left open")
	}
	serves(t, s)
	if !strings.Contains(s.logs.String(), "too_many_pings") {
		t.Fatalf("no log line for the ping flood: %s", s.logs)
	}
}

func TestPingsWithDataBetweenAreFine(t *testing.T) {
	// Clients ping after receiving data (BDP estimation): responses in
	// between forgive the pings, as grpc-go's server does.
	s := startServer(t, Config{}, Handlers{})
	r := newRaw(t, s.addr, true)
	for i := range 10 {
		id := uint32(2*i + 1)
		if err := r.request(id, "x"); err != nil {
			t.Fatal(err)
		}
		if !r.until(func(f http2.Frame) bool {
			h, ok := f.(*http2.MetaHeadersFrame)
			return ok && h.StreamID == id && h.StreamEnded()
		}) {
			t.Fatalf("call %d not answered", i)
		}
		if err := r.fr.WritePing(false, [8]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if !r.until(func(f http2.Frame) bool { p, ok := f.(*http2.PingFrame); return ok && p.IsAck() }) {
			t.Fatalf("ping %d not acknowledged", i)
		}
	}
}

func TestHostileSettingsFlood(t *testing.T) {
	s := startServer(t, Config{}, Handlers{})
	r := newRaw(t, s.addr, true)
	go func() {
		for range 100000 {
			if r.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20}) != nil {
				return
			}
		}
	}()
	if code, debug, ok := r.goAway(); !ok || code != http2.ErrCodeEnhanceYourCalm {
		t.Fatalf("SETTINGS flood: GOAWAY %v %q (%v), want ENHANCE_YOUR_CALM", code, debug, ok)
	}
	serves(t, s)
}

func TestHostileRapidReset(t *testing.T) {
	const limit = 8
	var running, peak atomic.Int64
	s := startServer(t, Config{MaxConcurrentStreams: limit}, Handlers{Unary: func(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
		if string(p.GetBody().GetValue()) != "x" {
			return echo(ctx, p)
		}
		n := running.Add(1)
		defer running.Add(-1)
		for {
			old := peak.Load()
			if n <= old || peak.CompareAndSwap(old, n) {
				break
			}
		}
		<-ctx.Done() // a lock call waiting on Raft
		return nil, ctx.Err()
	}})
	r := newRaw(t, s.addr, true)
	// Many calls, each reset at once: handlers beyond the limit must never
	// run, however fast the resets come.
	go func() {
		for i := range 5000 {
			id := uint32(2*i + 1)
			if r.request(id, "x") != nil || r.fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
				return
			}
		}
		_ = r.fr.WritePing(false, [8]byte{'e', 'n', 'd'})
	}()
	if !r.until(func(f http2.Frame) bool {
		p, ok := f.(*http2.PingFrame)
		return ok && p.IsAck() && p.Data == [8]byte{'e', 'n', 'd'}
	}) {
		t.Fatal("connection ended during the resets")
	}
	if p := peak.Load(); p > limit {
		t.Fatalf("%d handlers ran at once, limit %d", p, limit)
	}
	waitFor(t, "the reset calls to be released", func() bool { return s.activeStreams() == 0 })
	serves(t, s)
}

func TestHostileOversizedFrame(t *testing.T) {
	s := startServer(t, Config{}, Handlers{})
	r := newRaw(t, s.addr, true)
	if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.fr.WriteData(1, true, make([]byte, 20000)) }() // over the 16384 HTTP/2 allows without SETTINGS
	if code, _, ok := r.goAway(); !ok || code != http2.ErrCodeFrameSize {
		t.Fatalf("oversized frame: GOAWAY %v (%v), want FRAME_SIZE_ERROR", code, ok)
	}
	serves(t, s)
}

func TestHostileProtocolErrors(t *testing.T) {
	s := startServer(t, Config{}, Handlers{})
	for name, send := range map[string]func(r *rawClient) error{
		"even stream": func(r *rawClient) error {
			return r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 2, BlockFragment: r.block(), EndHeaders: true})
		},
		"data on idle stream": func(r *rawClient) error { return r.fr.WriteData(7, true, []byte("x")) },
		"window overflow":     func(r *rawClient) error { return r.fr.WriteWindowUpdate(0, 1<<31-1) },
	} {
		t.Run(name, func(t *testing.T) {
			r := newRaw(t, s.addr, true)
			go func() { _ = send(r) }()
			if code, _, ok := r.goAway(); !ok || code == http2.ErrCodeNo {
				t.Fatalf("GOAWAY %v (%v), want an error code", code, ok)
			}
			serves(t, s)
		})
	}
}

func TestAbandonedRequestDoesNotHoldUpGracefulStop(t *testing.T) {
	s := startServer(t, Config{}, Handlers{})
	r := newRaw(t, s.addr, true)
	// HEADERS and part of a message, then the client vanishes: no handler
	// ever runs, and the stream must not keep the connection alive.
	if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.block(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	if err := r.fr.WriteData(1, false, grpcMessage(payload("T", "half"))[:7]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the stream to open", func() bool { return s.activeStreams() == 1 })
	r.nc.Close()
	s.GracefulStop() // returns only once every connection has ended
	if n := len(s.snapshot()); n != 0 {
		t.Fatalf("%d connections left after GracefulStop", n)
	}
}

func TestHostilePartialRequestsAreBounded(t *testing.T) {
	s := startServer(t, Config{pendingLimit: 256 << 10}, Handlers{})
	r := newRaw(t, s.addr, true)
	// Requests that never end, each declaring a large message: the third
	// goes over what the connection may buffer and is refused.
	msg := grpcMessage(payload("T", strings.Repeat("p", 200<<10)))
	for _, id := range []uint32{1, 3, 5} {
		if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.block(), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		for part := msg[:100<<10]; len(part) > 0; part = part[min(len(part), 16000):] {
			if err := r.fr.WriteData(id, false, part[:min(len(part), 16000)]); err != nil {
				t.Fatal(err)
			}
		}
	}
	var status string
	if !r.until(func(f http2.Frame) bool {
		if h, ok := f.(*http2.MetaHeadersFrame); ok && h.StreamID == 5 {
			for _, hf := range h.Fields {
				if hf.Name == "grpc-status" {
					status = hf.Value
				}
			}
			return true
		}
		return false
	}) || status != "8" {
		t.Fatalf("third partial request: grpc-status %q, want 8 (RESOURCE_EXHAUSTED)", status)
	}
	// Resetting the others frees the budget: the next call is served.
	for _, id := range []uint32{1, 3} {
		if err := r.fr.WriteRSTStream(id, http2.ErrCodeCancel); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.request(7, "small"); err != nil {
		t.Fatal(err)
	}
	var body []byte
	if !r.until(func(f http2.Frame) bool {
		if d, ok := f.(*http2.DataFrame); ok && d.StreamID == 7 {
			body = bytes.Clone(d.Data())
			return true
		}
		return false
	}) || !bytes.Contains(body, []byte("small")) {
		t.Fatalf("call after the budget was freed: %q", body)
	}
	serves(t, s)
}

// rawBlock encodes exactly the fields given.
func (r *rawClient) rawBlock(fields ...hpack.HeaderField) []byte {
	r.hbuf.Reset()
	for _, f := range fields {
		_ = r.enc.WriteField(f)
	}
	return bytes.Clone(r.hbuf.Bytes())
}

// outcome reads until stream id is reset (reset, with its code) or
// answered (headers); a GOAWAY or the connection ending fails the test.
func (r *rawClient) outcome(id uint32) (code http2.ErrCode, reset bool) {
	r.t.Helper()
	if !r.until(func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			if f.StreamID == id {
				code, reset = f.ErrCode, true
				return true
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID == id {
				return true
			}
		case *http2.GoAwayFrame:
			r.t.Fatalf("stream %d: GOAWAY %v %q, want a stream error only", id, f.ErrCode, f.DebugData())
		}
		return false
	}) {
		r.t.Fatalf("stream %d: the connection ended", id)
	}
	return code, reset
}

// echoes sends a whole unary call on stream id and waits for its reply.
func (r *rawClient) echoes(id uint32, body string) bool {
	if err := r.request(id, body); err != nil {
		r.t.Fatal(err)
	}
	var got []byte
	return r.until(func(f http2.Frame) bool {
		if d, ok := f.(*http2.DataFrame); ok && d.StreamID == id {
			got = bytes.Clone(d.Data())
			return true
		}
		return false
	}) && bytes.Contains(got, []byte(body))
}

func TestHostileMalformedRequestHeaders(t *testing.T) {
	s := startServer(t, Config{}, Handlers{})
	hf := func(name, value string) hpack.HeaderField { return hpack.HeaderField{Name: name, Value: value} }
	method, scheme, path, authority, ctype := hf(":method", "POST"), hf(":scheme", "http"), hf(":path", UnaryMethod), hf(":authority", "x"), hf("content-type", "application/grpc")
	valid := []hpack.HeaderField{method, scheme, path, authority, ctype}
	plus := func(extra ...hpack.HeaderField) []hpack.HeaderField {
		return append(append([]hpack.HeaderField{}, valid...), extra...)
	}
	cases := []struct {
		name   string
		fields []hpack.HeaderField
	}{
		{"uppercase name", plus(hf("X-Upper", "v"))},
		{"space in name", plus(hf("x bad", "v"))},
		{"colon in name", plus(hf("x:y", "v"))},
		{"empty name", plus(hf("", "v"))},
		{"connection", plus(hf("connection", "keep-alive"))},
		{"keep-alive", plus(hf("keep-alive", "timeout=5"))},
		{"proxy-connection", plus(hf("proxy-connection", "keep-alive"))},
		{"transfer-encoding", plus(hf("transfer-encoding", "chunked"))},
		{"upgrade", plus(hf("upgrade", "h2c"))},
		{"te other than trailers", plus(hf("te", "gzip"))},
		{"pseudo after regular", []hpack.HeaderField{method, scheme, authority, ctype, path}},
		{"duplicate :path", []hpack.HeaderField{method, scheme, path, path, ctype}},
		{"duplicate :method", []hpack.HeaderField{method, method, scheme, path, ctype}},
		{"unknown pseudo", []hpack.HeaderField{method, scheme, path, hf(":foo", "x"), ctype}},
		{":status in a request", []hpack.HeaderField{method, scheme, path, hf(":status", "200"), ctype}},
		{":protocol", []hpack.HeaderField{method, scheme, path, hf(":protocol", "websocket"), ctype}},
		{"missing :method", []hpack.HeaderField{scheme, path, authority, ctype}},
		{"missing :scheme", []hpack.HeaderField{method, path, authority, ctype}},
		{"missing :path", []hpack.HeaderField{method, scheme, authority, ctype}},
		{"empty :path", []hpack.HeaderField{method, scheme, hf(":path", ""), ctype}},
		{"NUL in value", plus(hf("x-v", "a\x00b"))},
		{"CR LF in value", plus(hf("x-v", "a\r\nx-injected: b"))},
		{"trailing space in value", plus(hf("x-v", "a "))},
		{"leading tab in value", plus(hf("x-v", "\ta"))},
	}
	r := newRaw(t, s.addr, true)
	id := uint32(1)
	for _, tc := range cases {
		// Each on the same connection: the stream is reset, the connection
		// goes on serving.
		if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.rawBlock(tc.fields...), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		if err := r.fr.WriteData(id, true, grpcMessage(payload("T", "malformed"))); err != nil {
			t.Fatal(err)
		}
		if code, reset := r.outcome(id); !reset || code != http2.ErrCodeProtocol {
			t.Errorf("%s: reset %v, code %v; want RST_STREAM PROTOCOL_ERROR", tc.name, reset, code)
		}
		if !r.echoes(id+2, tc.name) {
			t.Fatalf("%s: the next call on the connection was not served", tc.name)
		}
		id += 4
	}
	// What real clients send is fine: te: trailers, user-agent, custom
	// metadata, -bin values, an empty value.
	if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, EndHeaders: true, BlockFragment: r.rawBlock(plus(
		hf("te", "trailers"), hf("user-agent", "grpc-java-netty/1.70.0"), hf("grpc-accept-encoding", "gzip"),
		hf("x-trace", "a b"), hf("x-id-bin", "AAEC"), hf("x-empty", ""))...)}); err != nil {
		t.Fatal(err)
	}
	if err := r.fr.WriteData(id, true, grpcMessage(payload("T", "well-formed"))); err != nil {
		t.Fatal(err)
	}
	if code, reset := r.outcome(id); reset {
		t.Fatalf("well-formed request reset with %v", code)
	}
	serves(t, s)
}

func TestHostileRequestTrailers(t *testing.T) {
	s := startServer(t, Config{}, Handlers{})
	r := newRaw(t, s.addr, true)
	msg := grpcMessage(payload("T", "with trailers"))
	open := func(id uint32) {
		t.Helper()
		if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.block(), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		if err := r.fr.WriteData(id, false, msg); err != nil {
			t.Fatal(err)
		}
	}
	trailers := func(id uint32, end bool, fields ...hpack.HeaderField) {
		t.Helper()
		if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.rawBlock(fields...), EndHeaders: true, EndStream: end}); err != nil {
			t.Fatal(err)
		}
	}
	// Trailers without pseudo-header fields end the request: it is served.
	open(1)
	trailers(1, true, hpack.HeaderField{Name: "x-checksum", Value: "1"})
	var body []byte
	if !r.until(func(f http2.Frame) bool {
		if d, ok := f.(*http2.DataFrame); ok && d.StreamID == 1 {
			body = bytes.Clone(d.Data())
			return true
		}
		return false
	}) || !bytes.Contains(body, []byte("with trailers")) {
		t.Fatalf("request ended by trailers: reply %q", body)
	}
	// A pseudo-header field in trailers, or trailers that do not end the
	// stream: the stream is malformed, the connection is not.
	open(3)
	trailers(3, true, hpack.HeaderField{Name: ":path", Value: UnaryMethod})
	if code, reset := r.outcome(3); !reset || code != http2.ErrCodeProtocol {
		t.Fatalf("pseudo-header in trailers: reset %v %v, want PROTOCOL_ERROR", reset, code)
	}
	open(5)
	trailers(5, false, hpack.HeaderField{Name: "x-more", Value: "1"})
	if code, reset := r.outcome(5); !reset || code != http2.ErrCodeProtocol {
		t.Fatalf("trailers without END_STREAM: reset %v %v, want PROTOCOL_ERROR", reset, code)
	}
	if !r.echoes(7, "after trailers") {
		t.Fatal("the connection does not serve after malformed trailers")
	}
	serves(t, s)
}

func TestStreamRefusedWhileDrainingDoesNotEndTheConnection(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	s := startServer(t, Config{}, Handlers{Unary: func(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
		if string(p.GetBody().GetValue()) == "slow" {
			close(entered)
			<-release
		}
		return echo(ctx, p)
	}})
	r := newRaw(t, s.addr, true)
	if err := r.request(1, "slow"); err != nil {
		t.Fatal(err)
	}
	<-entered
	go s.GracefulStop()
	if code, _, ok := r.goAway(); !ok || code != http2.ErrCodeNo {
		t.Fatalf("GracefulStop: GOAWAY %v (%v), want NO_ERROR", code, ok)
	}
	// A call the client sent before it read the GOAWAY: refused, and its
	// DATA (already on the way) must not be taken for a protocol error
	// that ends the call in flight.
	if err := r.request(3, "late"); err != nil {
		t.Fatal(err)
	}
	if code, reset := r.outcome(3); !reset || code != http2.ErrCodeRefusedStream {
		t.Fatalf("stream after GOAWAY: reset %v %v, want REFUSED_STREAM", reset, code)
	}
	close(release)
	if !r.until(func(f http2.Frame) bool {
		if g, ok := f.(*http2.GoAwayFrame); ok {
			t.Fatalf("second GOAWAY %v %q", g.ErrCode, g.DebugData())
		}
		h, ok := f.(*http2.MetaHeadersFrame)
		return ok && h.StreamID == 1 && h.StreamEnded()
	}) {
		t.Fatal("the call in flight did not finish")
	}
}

// flood sends n frames (send(i) writes the i-th), then a PING: the server
// must answer the flood with GOAWAY ENHANCE_YOUR_CALM before the PING's
// ACK. It returns the GOAWAY's debug text.
func (r *rawClient) flood(n int, send func(i int) error) string {
	r.t.Helper()
	done := [8]byte{'f', 'l', 'o', 'o', 'd', 'e', 'n', 'd'}
	go func() {
		for i := range n {
			if send(i) != nil {
				return
			}
		}
		_ = r.fr.WritePing(false, done)
	}()
	var code http2.ErrCode
	var debug string
	var acked bool
	if !r.until(func(f http2.Frame) bool {
		switch f := f.(type) {
		case *http2.GoAwayFrame:
			code, debug = f.ErrCode, string(f.DebugData())
			return true
		case *http2.PingFrame:
			acked = f.IsAck() && f.Data == done
			return acked
		}
		return false
	}) {
		r.t.Fatal("the connection ended without GOAWAY")
	}
	if acked {
		r.t.Fatalf("%d frames taken without GOAWAY", n)
	}
	if code != http2.ErrCodeEnhanceYourCalm {
		r.t.Fatalf("GOAWAY %v %q, want ENHANCE_YOUR_CALM", code, debug)
	}
	if !r.closed() {
		r.t.Fatal("connection left open after the GOAWAY")
	}
	return debug
}

func TestHostileFloodsOfFramesThatCarryNothing(t *testing.T) {
	s := startServer(t, Config{}, Handlers{})
	// A bidi stream left open, for the floods that need one.
	openStream := func(r *rawClient) {
		r.hbuf.Reset()
		for _, hf := range []hpack.HeaderField{
			{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
			{Name: ":path", Value: StreamMethod}, {Name: "content-type", Value: "application/grpc"},
		} {
			_ = r.enc.WriteField(hf)
		}
		if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: bytes.Clone(r.hbuf.Bytes()), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name   string
		stream bool
		send   func(r *rawClient, i int) error
		reason string
	}{
		{"empty DATA", true, func(r *rawClient, i int) error { return r.fr.WriteData(1, false, nil) }, "empty DATA"},
		{"padding-only DATA", true, func(r *rawClient, i int) error { return r.fr.WriteDataPadded(1, false, nil, make([]byte, 8)) }, "empty DATA"},
		{"empty DATA on a closed stream", false, func(r *rawClient, i int) error {
			if i == 0 {
				return r.request(1, "x")
			}
			return r.fr.WriteData(1, false, nil)
		}, "empty DATA"},
		{"PRIORITY", false, func(r *rawClient, i int) error {
			return r.fr.WritePriority(uint32(2*i+1), http2.PriorityParam{StreamDep: 0, Weight: 15})
		}, "PRIORITY"},
		{"unknown frame type", false, func(r *rawClient, i int) error { return r.fr.WriteRawFrame(0x42, 0, 0, []byte("ext")) }, "unknown types"},
		{"repeated GOAWAY", true, func(r *rawClient, i int) error { return r.fr.WriteGoAway(0, http2.ErrCodeNo, nil) }, "GOAWAY"},
		{"zero WINDOW_UPDATE on a stream", true, func(r *rawClient, i int) error {
			return r.fr.WriteRawFrame(http2.FrameWindowUpdate, 0, 1, []byte{0, 0, 0, 0})
		}, "malformed control frames"},
		{"header blocks on an ended stream", false, func(r *rawClient, i int) error {
			if i == 0 {
				return r.request(1, "x")
			}
			return r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: r.rawBlock(hpack.HeaderField{Name: "x", Value: "y"}), EndHeaders: true, EndStream: true})
		}, "header blocks"},
		{"WINDOW_UPDATE", false, func(r *rawClient, i int) error { return r.fr.WriteWindowUpdate(0, 1) }, "WINDOW_UPDATE"},
		{"WINDOW_UPDATE on a stream", true, func(r *rawClient, i int) error { return r.fr.WriteWindowUpdate(1, 1) }, "WINDOW_UPDATE"},
		{"PING ACK", false, func(r *rawClient, i int) error { return r.fr.WritePing(true, [8]byte{byte(i)}) }, "ACKs"},
		{"SETTINGS ACK", false, func(r *rawClient, i int) error { return r.fr.WriteSettingsAck() }, "ACKs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRaw(t, s.addr, true)
			r.t = t
			if tc.stream {
				openStream(r)
			}
			debug := r.flood(5000, func(i int) error { return tc.send(r, i) })
			if !strings.Contains(debug, tc.reason) {
				t.Fatalf("GOAWAY says %q, want it to name %q", debug, tc.reason)
			}
			serves(t, s)
		})
	}
	if !strings.Contains(s.logs.String(), "flood: more than") {
		t.Fatalf("no log line for the floods: %s", s.logs)
	}
}

func TestHostileProtocolErrorsOnIdleStreams(t *testing.T) {
	s := startServer(t, Config{}, Handlers{})
	for name, send := range map[string]func(r *rawClient) error{
		"RST_STREAM":    func(r *rawClient) error { return r.fr.WriteRSTStream(9, http2.ErrCodeCancel) },
		"WINDOW_UPDATE": func(r *rawClient) error { return r.fr.WriteWindowUpdate(9, 100) },
	} {
		t.Run(name, func(t *testing.T) {
			r := newRaw(t, s.addr, true)
			go func() { _ = send(r) }()
			if code, debug, ok := r.goAway(); !ok || code != http2.ErrCodeProtocol || !strings.Contains(debug, "idle stream") {
				t.Fatalf("GOAWAY %v %q (%v), want PROTOCOL_ERROR on an idle stream", code, debug, ok)
			}
			serves(t, s)
		})
	}
}

// TestRealClientsStayWithinFloodLimits: grpc-go's client, with the
// traffic that makes it send control frames (BDP pings and window
// updates under large messages, many calls, a stream both ways), never
// meets a flood limit.
func TestRealClientsStayWithinFloodLimits(t *testing.T) {
	s := startServer(t, Config{}, Handlers{})
	ctx := testCtx(t)
	cc := dial(t, s.addr)
	client := pb.NewRequestClient(cc)
	big := strings.Repeat("b", 200<<10)
	for i := range 300 {
		body := "small"
		if i%10 == 0 {
			body = big
		}
		r, err := client.Request(ctx, payload("T", body))
		if err != nil || len(r.GetBody().GetValue()) != len(body) {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	stream, err := pb.NewBiRequestStreamClient(cc).RequestBiStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		body := fmt.Sprint(i)
		if i%20 == 0 {
			body = big
		}
		if err := stream.Send(payload("T", body)); err != nil {
			t.Fatal(err)
		}
		if p, err := stream.Recv(); err != nil || len(p.GetBody().GetValue()) != len(body) {
			t.Fatalf("stream message %d: %v", i, err)
		}
	}
	if err := stream.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("end of stream: %v", err)
	}
	if n := len(s.snapshot()); n != 1 {
		t.Fatalf("%d connections, want the one", n)
	}
	if l := s.logs.String(); strings.Contains(l, "closing connection") {
		t.Fatalf("a real client's connection was closed: %s", l)
	}
}

func TestKeepalivePingsAndTheirAcks(t *testing.T) {
	errs := make(chan string, 4)
	s := startServer(t, Config{KeepaliveTime: 10 * time.Millisecond, KeepaliveTimeout: 250 * time.Millisecond,
		ConnError: func(code string) { errs <- code }}, Handlers{})
	r := newRaw(t, s.addr, true)
	// An idle client answering each keepalive ping: the ACKs are asked
	// for, so more of them than maxUnaskedAcks are fine.
	for i := range maxUnaskedAcks + 4 {
		var data [8]byte
		if !r.until(func(f http2.Frame) bool {
			if g, ok := f.(*http2.GoAwayFrame); ok {
				t.Fatalf("ping %d: GOAWAY %v %q", i, g.ErrCode, g.DebugData())
			}
			p, ok := f.(*http2.PingFrame)
			if ok && !p.IsAck() {
				data = p.Data
			}
			return ok && !p.IsAck()
		}) {
			t.Fatalf("no keepalive ping %d", i)
		}
		if err := r.fr.WritePing(true, data); err != nil {
			t.Fatal(err)
		}
	}
	// A client that stops answering is closed.
	if !r.closed() {
		t.Fatal("connection open after a keepalive ping went unanswered")
	}
	if !strings.Contains(s.logs.String(), "keepalive ping not answered") {
		t.Fatalf("no log line for the keepalive close: %s", s.logs)
	}
	if code := <-errs; code != "keepalive_timeout" {
		t.Fatalf("ConnError got %q, want keepalive_timeout", code)
	}
	serves(t, s)
}
