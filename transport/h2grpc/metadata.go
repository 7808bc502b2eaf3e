package h2grpc

import (
	"context"
	"encoding/base64"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// mdFields are the header fields of a request that grpc-go gives its
// handlers as incoming metadata, as they came (-bin values still base64):
// kept in the stream, so a request costs no allocation for them unless it
// carries more than a few or its handler asks for them.
type mdFields struct {
	n      int
	inline [6][2]string
	more   [][2]string
}

func (m *mdFields) add(name, value string) {
	if m.n < len(m.inline) {
		m.inline[m.n] = [2]string{name, value}
	} else {
		m.more = append(m.more, [2]string{name, value})
	}
	m.n++
}

func (m *mdFields) at(i int) (name, value string) {
	if i < len(m.inline) {
		return m.inline[i][0], m.inline[i][1]
	}
	f := m.more[i-len(m.inline)]
	return f[0], f[1]
}

// inMetadata says whether grpc-go would put a regular request field in
// the incoming metadata: all but its reserved ones (user-agent it keeps,
// content-type too when it is gRPC's, which is checked before a handler
// runs).
func inMetadata(name string) bool {
	switch name {
	case "te", "grpc-timeout", "grpc-encoding", "grpc-message", "grpc-message-type", "grpc-status":
		return false
	}
	return true
}

// validBinValue says whether a -bin field's value decodes, as grpc-go
// decodes it: standard base64, padded or not.
func validBinValue(v string) bool {
	pad := 0
	for i := 0; i < len(v); i++ {
		switch b := v[i]; {
		case b == '=':
			pad++
		case pad > 0:
			return false // data after padding
		case 'A' <= b && b <= 'Z', 'a' <= b && b <= 'z', '0' <= b && b <= '9', b == '+', b == '/':
		default:
			return false
		}
	}
	if pad > 0 {
		return len(v)%4 == 0 && pad <= 2
	}
	return len(v)%4 != 1
}

func decodeBin(v string) string {
	enc := base64.RawStdEncoding
	if len(v)%4 == 0 {
		enc = base64.StdEncoding
	}
	b, err := enc.DecodeString(v)
	if err != nil {
		return v // validBinValue let it through; cannot happen
	}
	return string(b)
}

// build makes the metadata.MD grpc-go's server would: every field kept,
// -bin values decoded, host as :authority when :authority is missing
// (and dropped otherwise).
func (m *mdFields) build() metadata.MD {
	md := make(metadata.MD, m.n)
	var host []string
	for i := range m.n {
		name, value := m.at(i)
		if strings.HasSuffix(name, "-bin") {
			value = decodeBin(value)
		}
		if name == "host" {
			host = append(host, value)
			continue
		}
		md[name] = append(md[name], value)
	}
	if _, ok := md[":authority"]; !ok && host != nil {
		md[":authority"] = host
	}
	return md
}

// The context keys of grpc-go's incoming metadata and server transport
// stream. They are unexported types; a context that records the key it is
// asked for learns them, so a call's context can answer for them without
// a context.WithValue (and its allocation) per call.
var mdIncomingKey, transportStreamKey = contextKeys()

type keySpy struct {
	context.Context
	key any
}

func (k *keySpy) Value(key any) any {
	k.key = key
	return nil
}

func contextKeys() (md, ts any) {
	spy := &keySpy{Context: context.Background()}
	metadata.FromIncomingContext(spy)
	md = spy.key
	spy.key = nil
	grpc.ServerTransportStreamFromContext(spy)
	ts = spy.key
	// Should grpc-go ever look them up some other way, match nothing (the
	// tests notice).
	if md == nil {
		md = new(int)
	}
	if ts == nil {
		ts = new(int)
	}
	return md, ts
}

// callCtx is the context a handler gets: the call's deadline and
// cancellation (the stream's callLife), its connection's values (the
// peer), and, on demand, the incoming metadata
// (metadata.FromIncomingContext) and the grpc.ServerTransportStream
// (grpc.Method, grpc.SetHeader, ...). It lives in the stream: no
// allocation.
type callCtx struct {
	conn context.Context // the connection's: values only
	st   *stream
}

func (c *callCtx) Deadline() (time.Time, bool) { return c.st.life.Deadline() }
func (c *callCtx) Done() <-chan struct{}       { return c.st.life.Done() }
func (c *callCtx) Err() error                  { return c.st.life.Err() }

func (c *callCtx) Value(key any) any {
	switch key {
	case mdIncomingKey:
		if c.st.md.n == 0 {
			return nil // as grpc-go: no metadata, none in the context
		}
		return c.st.incomingMD()
	case transportStreamKey:
		return (*transportStream)(c.st)
	}
	return c.conn.Value(key)
}

func (c *callCtx) String() string { return "h2grpc call " + c.st.method() }

// incomingMD builds the call's metadata the first time it is asked for.
type lazyMD struct {
	once sync.Once
	md   metadata.MD
}

func (st *stream) incomingMD() metadata.MD {
	st.inMD.once.Do(func() { st.inMD.md = st.md.build() })
	return st.inMD.md
}

func (st *stream) method() string {
	if st.bidi {
		return StreamMethod
	}
	return UnaryMethod
}

// errResponseMetadata is what setting response metadata returns: the
// gateway sends none, so this transport does not carry it.
var errResponseMetadata = status.Error(codes.Unimplemented, "h2grpc: response metadata (headers and trailers set by the handler) is not supported")

// transportStream is the call as grpc.ServerTransportStreamFromContext
// gives it, for grpc.Method, grpc.SetHeader, grpc.SendHeader and
// grpc.SetTrailer.
type transportStream stream

func (ts *transportStream) Method() string { return (*stream)(ts).method() }

func (ts *transportStream) SetHeader(md metadata.MD) error { return (*stream)(ts).SetHeader(md) }

func (ts *transportStream) SendHeader(md metadata.MD) error { return (*stream)(ts).SendHeader(md) }

func (ts *transportStream) SetTrailer(md metadata.MD) error {
	if md.Len() == 0 {
		return nil
	}
	return errResponseMetadata
}
