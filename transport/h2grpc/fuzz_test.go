package h2grpc

import (
	"bytes"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"

	"nacos-lockd/protocol/pb"
)

// FuzzConn feeds arbitrary bytes after the client preface: whatever comes,
// the server must not crash, and must end the connection once the client
// has stopped sending (no goroutine kept).
func FuzzConn(f *testing.F) {
	s := NewServer(Config{MaxRecvMsgSize: 64 << 10, MaxConcurrentStreams: 16, HandshakeTimeout: time.Second},
		Handlers{Unary: echo, Stream: func(st grpc.BidiStreamingServer[pb.Payload, pb.Payload]) error {
			for {
				p, err := st.Recv()
				if err != nil {
					return nil
				}
				if err := st.Send(p); err != nil {
					return nil
				}
			}
		}})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	go func() { _ = s.Serve(lis) }()
	f.Cleanup(s.Stop)

	// Seeds: a unary call, a stream with two messages, a reset, pings.
	var seed bytes.Buffer
	fr := http2.NewFramer(&seed, nil)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	block := func(path string) []byte {
		hb.Reset()
		for _, hf := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"}, {Name: ":path", Value: path}, {Name: "content-type", Value: "application/grpc"}, {Name: "grpc-timeout", Value: "1S"}} {
			_ = enc.WriteField(hf)
		}
		return bytes.Clone(hb.Bytes())
	}
	_ = fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(UnaryMethod), EndHeaders: true})
	_ = fr.WriteData(1, true, grpcMessage(payload("T", "unary")))
	f.Add(bytes.Clone(seed.Bytes()))
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: block(StreamMethod), EndHeaders: true})
	_ = fr.WriteData(3, false, grpcMessage(payload("T", "one")))
	_ = fr.WriteData(3, true, grpcMessage(payload("T", "two")))
	_ = fr.WriteRSTStream(1, http2.ErrCodeCancel)
	_ = fr.WritePing(false, [8]byte{1})
	_ = fr.WriteWindowUpdate(0, 1000)
	f.Add(bytes.Clone(seed.Bytes()))

	f.Fuzz(func(t *testing.T, in []byte) {
		nc, err := net.Dial("tcp", lis.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := nc.Write(append([]byte(http2.ClientPreface), in...)); err != nil {
			return // the server may close before reading it all
		}
		_ = nc.(*net.TCPConn).CloseWrite()
		// The server must end the connection: it has all the client sends.
		if _, err := io.Copy(io.Discard, nc); err != nil && !errors.Is(err, net.ErrClosed) {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the server kept the connection open after the client finished")
			}
		}
	})
}
