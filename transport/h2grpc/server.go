package h2grpc

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"google.golang.org/grpc"

	"nacos-lockd/protocol/pb"
)

// The methods served, as grpc clients put them in :path.
const (
	UnaryMethod  = pb.Request_Request_FullMethodName                 // "/Request/request"
	StreamMethod = pb.BiRequestStream_RequestBiStream_FullMethodName // "/BiRequestStream/requestBiStream"
)

// Handlers are the two methods' implementations. A handler's context holds
// the call's peer.Peer (the accepted connection's RemoteAddr, and for TLS
// a credentials.TLSInfo), the incoming metadata and a
// grpc.ServerTransportStream (which refuses response metadata), carries
// the client's grpc-timeout as its deadline and ends when the client
// cancels or the connection ends. An
// error a handler returns reaches the client as its gRPC status
// (status.FromError; codes.Unknown for other errors).
type Handlers struct {
	Unary  func(ctx context.Context, req *pb.Payload) (*pb.Payload, error)
	Stream func(stream grpc.BidiStreamingServer[pb.Payload, pb.Payload]) error
}

// Config tunes a Server. Zero values pick the defaults noted.
type Config struct {
	// TLS, when set, serves TLS only; "h2" is added to its NextProtos and
	// clients must negotiate it (as grpc clients do). Client certificates
	// are checked as the config says.
	TLS *tls.Config
	// MaxRecvMsgSize and MaxSendMsgSize bound one message each way;
	// larger ones fail the call with RESOURCE_EXHAUSTED. Default 4 MiB.
	MaxRecvMsgSize int
	MaxSendMsgSize int
	// MaxConcurrentStreams is advertised to clients and enforced: a call
	// counts from its HEADERS until its handler has returned, so streams a
	// client resets while their handlers still run count too (rapid
	// reset); a stream beyond the limit is refused (REFUSED_STREAM, which
	// clients retry). Default 1000.
	MaxConcurrentStreams uint32
	// MaxHeaderListSize bounds a request's decoded header list (advertised
	// as SETTINGS_MAX_HEADER_LIST_SIZE). Default 16 KiB: grpc clients send
	// a few hundred bytes, Nacos puts its metadata in the message.
	MaxHeaderListSize uint32
	// KeepaliveTime is how long a connection may be silent before the
	// server pings it; KeepaliveTimeout how long it then waits for any
	// frame before closing the connection. Defaults 30 s and 20 s.
	KeepaliveTime    time.Duration
	KeepaliveTimeout time.Duration
	// MinPingInterval is the shortest interval between client pings the
	// server tolerates (grpc-go's keepalive.EnforcementPolicy.MinTime with
	// PermitWithoutStream); the third ping too early gets GOAWAY
	// ENHANCE_YOUR_CALM. Sending headers or data forgives earlier pings,
	// as grpc-go does, because clients ping after data to size windows.
	// Default 10 s.
	MinPingInterval time.Duration
	// HandshakeTimeout bounds the TLS handshake and the client preface
	// with its first SETTINGS. Default 20 s.
	HandshakeTimeout time.Duration
	// MaxCallDuration, if set, bounds every unary call: its context ends
	// this long after its HEADERS arrived, or at the client's grpc-timeout
	// if that is sooner. A server that bounds its handlers anyway sets it
	// instead of wrapping the call's context in a timeout of its own: the
	// call's context is then the stream's, with no timer or context of
	// its own (calllife.go). Streams are never bounded.
	MaxCallDuration time.Duration
	// Workers is how many long-lived goroutines serve calls; calls beyond
	// them get a goroutine of their own. Default 256.
	Workers int
	// Log gets one line per connection ended by a protocol violation or a
	// limit, and debug lines otherwise.
	Log zerolog.Logger
	// ConnError, if set, is called once for each connection closed because
	// of the client: with the GOAWAY's error code ("PROTOCOL_ERROR",
	// "ENHANCE_YOUR_CALM", ...) for a protocol violation or a limit, with
	// "keepalive_timeout" when a keepalive ping went unanswered. For
	// counters: it must not block.
	ConnError func(code string)

	pendingLimit int // tests: maxPendingReq's bound instead of the default
}

func (c Config) withDefaults() Config {
	if c.MaxRecvMsgSize <= 0 {
		c.MaxRecvMsgSize = 4 << 20
	}
	if c.MaxSendMsgSize <= 0 {
		c.MaxSendMsgSize = 4 << 20
	}
	if c.MaxConcurrentStreams == 0 {
		c.MaxConcurrentStreams = 1000
	}
	if c.MaxHeaderListSize == 0 {
		c.MaxHeaderListSize = 16 << 10
	}
	if c.KeepaliveTime <= 0 {
		c.KeepaliveTime = 30 * time.Second
	}
	if c.KeepaliveTimeout <= 0 {
		c.KeepaliveTimeout = 20 * time.Second
	}
	if c.MinPingInterval <= 0 {
		c.MinPingInterval = 10 * time.Second
	}
	if c.HandshakeTimeout <= 0 {
		c.HandshakeTimeout = 20 * time.Second
	}
	if c.Workers <= 0 {
		c.Workers = 256
	}
	return c
}

// Server serves the two methods on any number of listeners.
type Server struct {
	cfg Config
	h   Handlers
	tls *tls.Config // cfg.TLS with "h2" offered, or nil

	work   chan *stream  // calls for the workers
	quit   chan struct{} // closed when the workers are to end
	stopCh chan struct{} // closed by Stop: connections stop waiting for handlers
	once   sync.Once     // starts the workers

	mu       sync.Mutex
	lis      map[net.Listener]struct{}
	conns    map[*conn]struct{}
	draining bool // GracefulStop: new connections are refused
	stopped  bool // Stop: everything is closed
	connWG   sync.WaitGroup

	// held are the connections holding a PING ACK for their next
	// response (conn.holdAck); a sweeper goroutine runs while any does.
	ackMu    sync.Mutex
	held     map[*conn]struct{}
	sweeping bool
}

// NewServer builds a server; Serve starts it on a listener.
func NewServer(cfg Config, h Handlers) *Server {
	cfg = cfg.withDefaults()
	s := &Server{
		cfg:    cfg,
		h:      h,
		work:   make(chan *stream),
		quit:   make(chan struct{}),
		stopCh: make(chan struct{}),
		lis:    make(map[net.Listener]struct{}),
		conns:  make(map[*conn]struct{}),
	}
	if cfg.TLS != nil {
		t := cfg.TLS.Clone()
		if !containsString(t.NextProtos, "h2") {
			t.NextProtos = append([]string{"h2"}, t.NextProtos...)
		}
		s.tls = t
	}
	return s
}

// ErrServerStopped is what Serve returns after GracefulStop or Stop, as
// grpc.ErrServerStopped is for grpc-go.
var ErrServerStopped = errors.New("h2grpc: the server has been stopped")

// Serve accepts connections on lis until it fails or the server stops. It
// always returns a non-nil error (ErrServerStopped after a stop) and closes
// lis.
func (s *Server) Serve(lis net.Listener) error {
	s.once.Do(s.startWorkers)
	s.mu.Lock()
	if s.draining || s.stopped {
		s.mu.Unlock()
		lis.Close()
		return ErrServerStopped
	}
	s.lis[lis] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lis, lis)
		s.mu.Unlock()
		lis.Close()
	}()
	var delay time.Duration // backoff after temporary accept errors, as net/http
	for {
		nc, err := lis.Accept()
		if err != nil {
			s.mu.Lock()
			done := s.draining || s.stopped
			s.mu.Unlock()
			if done {
				return ErrServerStopped
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.cfg.Log.Warn().Err(err).Dur("retry_in", delay).Msg("accept failed")
				time.Sleep(delay)
				continue
			}
			return fmt.Errorf("h2grpc: accept: %w", err)
		}
		delay = 0
		s.mu.Lock()
		if s.draining || s.stopped {
			s.mu.Unlock()
			nc.Close()
			return ErrServerStopped
		}
		c := newConn(s, nc)
		s.conns[c] = struct{}{}
		s.connWG.Add(1)
		s.mu.Unlock()
		go c.serve()
	}
}

func (s *Server) forget(c *conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.connWG.Done()
}

// GracefulStop stops accepting, sends every connection GOAWAY, lets the
// calls in flight finish and returns once every connection has closed
// (or Stop was called).
func (s *Server) GracefulStop() {
	conns := s.closeListeners(false)
	// At once on every connection: one whose writer is stuck on a peer
	// that does not read must not hold up the others' GOAWAY.
	for _, c := range conns {
		go c.drain()
	}
	s.connWG.Wait()
	s.stopWorkers()
}

// Stop closes the listeners and every connection at once (each sent a
// GOAWAY if its writer is free); the calls' contexts end. It does not wait
// for handlers to return.
func (s *Server) Stop() {
	conns := s.closeListeners(true)
	for _, c := range conns {
		go c.kill() // each may wait writeGrace for a stuck writer
	}
	s.connWG.Wait()
	s.stopWorkers()
}

// closeListeners begins a stop (stop: Stop's, which stops waiting for
// handlers) and returns the connections to end.
func (s *Server) closeListeners(stop bool) []*conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.draining = true
	if stop && !s.stopped {
		s.stopped = true
		close(s.stopCh)
	}
	for l := range s.lis {
		l.Close()
	}
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	return conns
}

// workerCalls is how many calls a worker serves before it hands over to a
// fresh goroutine, so a stack grown by one deep call is not kept forever
// (grpc-go's workers do the same).
const workerCalls = 1 << 16

func (s *Server) startWorkers() {
	for range s.cfg.Workers {
		go s.worker()
	}
}

func (s *Server) worker() {
	for range workerCalls {
		select {
		case st := <-s.work:
			st.run()
		case <-s.quit:
			return
		}
	}
	go s.worker()
}

func (s *Server) stopWorkers() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.quit:
	default:
		close(s.quit)
	}
}

// dispatch runs a call's handler on a free worker, or on a goroutine of
// its own when all are busy.
func (s *Server) dispatch(st *stream) {
	select {
	case s.work <- st:
	default:
		go st.run()
	}
}

// maxPendingReq bounds the request bytes a connection may have buffered
// for calls whose handler has not started: room for a few requests of the
// largest size.
func (s *Server) maxPendingReq() int {
	if s.cfg.pendingLimit > 0 {
		return s.cfg.pendingLimit
	}
	return max(64<<20, 2*s.cfg.MaxRecvMsgSize)
}

func containsString(l []string, s string) bool {
	for _, v := range l {
		if v == s {
			return true
		}
	}
	return false
}
