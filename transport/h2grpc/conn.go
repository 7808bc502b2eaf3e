package h2grpc

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
)

const (
	clientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

	// Our receive windows. A stream may have this much of its request
	// buffered beyond what its handler has taken; unary requests are
	// buffered whole anyway (up to MaxRecvMsgSize), so for them the
	// stream window is returned as data arrives.
	streamWindow = 256 << 10
	connWindow   = 1 << 20
	// defaultWindow is HTTP/2's initial window, before SETTINGS say more.
	defaultWindow = 65535
	maxWindow     = 1<<31 - 1

	bufSize = 32 << 10 // read and write buffer per connection, as grpc-go

	// maxSettingsPerStream bounds SETTINGS frames (each costs an ACK) a
	// client may send between two new streams: grpc clients send one or
	// two per connection, a flood sends thousands.
	maxSettingsPerStream = 100
	// maxPingStrikes is how many too-early pings are forgiven (grpc-go's).
	maxPingStrikes = 2
	// Frames that carry nothing (see floodCounts): how many of each kind
	// a client may send between two useful frames. grpc-go and grpc-java
	// clients send none of the first three kinds, and a WINDOW_UPDATE or
	// two (stream and connection) after the DATA they receive.
	maxEmptyData     = 16  // DATA without payload or END_STREAM
	maxIgnored       = 100 // PRIORITY, unknown types, extra GOAWAYs, blocks on ended streams, frames reset by the Framer
	maxUnaskedAcks   = 16  // PING and SETTINGS ACKs for nothing we sent
	maxWindowUpdates = 100 // WINDOW_UPDATE without DATA sent since the last one
	// writeGrace bounds the flush of a GOAWAY to a peer that may not read.
	writeGrace = time.Second
)

// conn is one client connection: its reader (serve), the write side
// shared by the handlers, and its streams.
type conn struct {
	s   *Server
	nc  net.Conn
	log zerolog.Logger
	// ctx holds the peer: the values of every call's context (the calls'
	// ends are their streams', callLife).
	ctx context.Context

	// Reader-owned.
	br                  *bufio.Reader
	fr                  *http2.Framer
	recvWin             int64  // what the client may still send on the connection
	recvUnacked         uint32 // DATA bytes read but not yet returned to the client
	pendingReq          int    // bytes of unary requests buffered whose handler has not started
	settingsSinceStream int
	maxSeen             uint32 // highest stream id the client has used
	flood               floodCounts
	settingsAcked       bool // the ACK of our SETTINGS has come
	goAwaySeen          bool
	hdec                *hpack.Decoder
	hdr                 requestHeaders // the header block being read

	// The write side. wmu serialises frames; wcond wakes writers waiting
	// for flow-control window (and is broadcast when a stream or the
	// connection ends, so none waits forever).
	wmu          sync.Mutex
	wcond        *sync.Cond
	bw           *bufio.Writer
	sock         *sockWriter // under bw on a plain connection (nil with TLS)
	henc         *hpack.Encoder
	hbuf         bytes.Buffer
	sendWin      int64 // the client's connection window for our DATA
	peerInitWin  int64 // the client's SETTINGS_INITIAL_WINDOW_SIZE
	peerMaxFrame uint32
	wclosed      bool    // the connection is gone: every write fails
	ctrlUrgent   bool    // control frames buffered that must go out now
	ctrlLazy     bool    // PING ACKs buffered: the next response may carry them
	ackData      [8]byte // the held PING ACK's payload (holdAck)
	ackListed    bool    // c is in the server's held set (both guarded by wmu)
	// ackSince is when the PING ACK waiting to go out behind the next
	// response was received (UnixNano), 0 when none waits: written under
	// wmu, read by the sweeper without it.
	ackSince         atomic.Int64
	sweeping         atomic.Bool // a sweeper goroutine is flushing its held ACK
	unaryInFlight    int         // unary calls whose response is still to be written
	resetPingStrikes bool        // headers or data sent since the last ping
	dataSinceWU      bool        // DATA sent since the client's last WINDOW_UPDATE
	pingStrikes      int
	lastPingAt       time.Time
	windowWaits      int // writers waiting for window (tests look)

	// Streams. Lock order: wmu before mu, never the reverse.
	mu         sync.Mutex
	streams    map[uint32]*stream
	active     uint32 // streams counted against MaxConcurrentStreams
	finishing  uint32 // of them, handlers that have returned and write their last frames
	lastStream uint32 // highest stream id accepted
	draining   bool   // GOAWAY sent: no new streams, close when idle
	readerDone bool
	idle       chan struct{} // closed when the reader is done and no stream is left
	reaper     *time.Timer   // ends calls whose deadline passed (reapDue)
	reapAt     time.Time     // when reaper fires; zero: not set

	activity  atomic.Bool  // a frame arrived since keepalive last looked
	pingsOut  atomic.Int32 // keepalive pings not yet acknowledged
	closeOnce sync.Once
	done      chan struct{} // closed when the connection is closed
}

func newConn(s *Server, nc net.Conn) *conn {
	c := &conn{
		s:            s,
		nc:           nc,
		log:          s.cfg.Log.With().Str("remote", nc.RemoteAddr().String()).Logger(),
		recvWin:      defaultWindow,
		sendWin:      defaultWindow,
		peerInitWin:  defaultWindow,
		peerMaxFrame: 16384,
		streams:      make(map[uint32]*stream),
		idle:         make(chan struct{}),
		done:         make(chan struct{}),
	}
	c.wcond = sync.NewCond(&c.wmu)
	return c
}

// connError ends the connection with GOAWAY(code).
type connError struct {
	code http2.ErrCode
	why  string
}

func (e *connError) Error() string { return fmt.Sprintf("%s: %s", e.code, e.why) }

// serve runs the connection: handshake, then the read loop, then waits
// for the handlers before the server forgets it.
func (c *conn) serve() {
	defer c.s.forget(c)
	err := c.handshake()
	if err == nil {
		go c.keepalive()
		err = c.readLoop()
	}
	c.finish(err)
	// Streams still waiting for their request have no handler to end them.
	c.mu.Lock()
	var orphans []*stream
	for _, st := range c.streams {
		if !st.dispatched {
			orphans = append(orphans, st)
		}
	}
	c.mu.Unlock()
	for _, st := range orphans {
		st.release()
	}
	c.mu.Lock()
	c.readerDone = true
	if c.active == 0 {
		close(c.idle)
	}
	c.mu.Unlock()
	select {
	case <-c.idle:
	case <-c.s.stopCh: // Stop: handlers are not waited for
	}
}

// handshake does TLS (if configured), reads the client preface and the
// client's first SETTINGS, and sends ours, within HandshakeTimeout.
func (c *conn) handshake() error {
	_ = c.nc.SetDeadline(time.Now().Add(c.s.cfg.HandshakeTimeout))
	rw := c.nc                // what frames are read from and written to: TLS or the socket
	addr := c.nc.RemoteAddr() // the accepted conn's: the gateway's connAddr
	p := &peer.Peer{Addr: addr, LocalAddr: c.nc.LocalAddr()}
	if c.s.tls != nil {
		tc := tls.Server(rw, c.s.tls)
		if err := tc.Handshake(); err != nil {
			// Not worth a warning: probes and scanners do this.
			return fmt.Errorf("tls handshake: %w", err)
		}
		st := tc.ConnectionState()
		if st.NegotiatedProtocol != "h2" {
			return &connError{http2.ErrCodeProtocol, fmt.Sprintf("tls: client did not negotiate h2 (ALPN %q)", st.NegotiatedProtocol)}
		}
		p.AuthInfo = credentials.TLSInfo{State: st, CommonAuthInfo: credentials.CommonAuthInfo{SecurityLevel: credentials.PrivacyAndIntegrity}}
		rw = tc
	}
	// What close, drain and kill (other goroutines) read is set under wmu.
	c.wmu.Lock()
	if c.wclosed {
		c.wmu.Unlock()
		return net.ErrClosed
	}
	c.ctx = peer.NewContext(context.Background(), p)
	c.br = bufio.NewReaderSize(rw, bufSize)
	if c.s.tls == nil {
		c.sock = &sockWriter{w: rw}
		if sc, ok := rw.(syscall.Conn); ok {
			if raw, err := sc.SyscallConn(); err == nil {
				c.sock.raw = raw
			}
		}
		c.bw = bufio.NewWriterSize(c.sock, bufSize)
	} else {
		c.bw = bufio.NewWriterSize(rw, bufSize)
	}
	c.fr = http2.NewFramer(c.bw, c.br)
	c.fr.SetReuseFrames()
	c.fr.SetMaxReadFrameSize(16384) // HTTP/2's default; we advertise no other
	// Header blocks are decoded here, not by the Framer's ReadMetaHeaders:
	// we keep the five fields we use instead of building every field of
	// every request (8 allocations a call fewer).
	c.hdec = hpack.NewDecoder(4096, c.emitHeader)
	c.hdec.SetMaxStringLength(int(c.s.cfg.MaxHeaderListSize))
	c.henc = hpack.NewEncoder(&c.hbuf)
	c.wmu.Unlock()

	pre := make([]byte, len(clientPreface))
	if _, err := io.ReadFull(c.br, pre); err != nil {
		return fmt.Errorf("read client preface: %w", err)
	}
	if string(pre) != clientPreface {
		return &connError{http2.ErrCodeProtocol, fmt.Sprintf("bad client preface %q", pre)}
	}
	c.wmu.Lock()
	err := c.fr.WriteSettings(
		http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: c.s.cfg.MaxConcurrentStreams},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: streamWindow},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: c.s.cfg.MaxHeaderListSize},
	)
	if err == nil {
		err = c.fr.WriteWindowUpdate(0, connWindow-defaultWindow)
		c.recvWin = connWindow
	}
	if err == nil {
		err = c.bw.Flush()
	}
	c.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("write server preface: %w", err)
	}
	f, err := c.fr.ReadFrame()
	if err != nil {
		return fmt.Errorf("read client SETTINGS: %w", err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		return &connError{http2.ErrCodeProtocol, fmt.Sprintf("first frame is %s, not SETTINGS", f.Header().Type)}
	}
	if err := c.onSettings(sf); err != nil {
		return err
	}
	_ = c.nc.SetDeadline(time.Time{})
	return c.flushControl()
}

// finish closes the connection after the reader has stopped: a GOAWAY
// saying why (for a protocol error or a limit), a log line, and the
// contexts of every call end.
func (c *conn) finish(err error) {
	var ce *connError
	var h2ce http2.ConnectionError
	switch {
	case errors.As(err, &ce):
	case errors.As(err, &h2ce):
		ce = &connError{http2.ErrCode(h2ce), "protocol violation"}
		if ce.code == http2.ErrCodeCompression {
			ce.why = "header block not decodable: bad HPACK, or a header larger than the header list limit"
		}
		if d := c.fr.ErrorDetail(); d != nil {
			ce.why = d.Error()
		}
	case errors.Is(err, http2.ErrFrameTooLarge):
		ce = &connError{http2.ErrCodeFrameSize, "frame larger than SETTINGS_MAX_FRAME_SIZE"}
	}
	switch {
	case ce != nil:
		c.log.Warn().Str("code", ce.code.String()).Str("reason", ce.why).Msg("closing connection")
		if f := c.s.cfg.ConnError; f != nil {
			f(ce.code.String())
		}
		c.goAwayAndClose(ce.code, ce.why)
	case err == nil, errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrDeadlineExceeded) && c.isClosed():
		c.close()
	default:
		c.log.Debug().Err(err).Msg("connection ended")
		c.close()
	}
}

func (c *conn) isClosed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// close ends the connection: writes fail, window waiters and handlers'
// contexts are released, and the socket is closed.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.wmu.Lock()
		c.wclosed = true
		c.wcond.Broadcast()
		c.wmu.Unlock()
		close(c.done)
		c.endLiveCalls()
		c.nc.Close() // the socket: a TLS connection on it ends with it
	})
}

// goAwayAndClose tells the client why (unless its connection is too stuck
// to take it within writeGrace) and closes.
func (c *conn) goAwayAndClose(code http2.ErrCode, why string) {
	// A writer stuck on a peer that does not read lets go of the write
	// lock within writeGrace (writers waiting for window do at once).
	_ = c.nc.SetWriteDeadline(time.Now().Add(writeGrace))
	sent := false
	c.wmu.Lock()
	if !c.wclosed && c.fr != nil {
		c.mu.Lock()
		last := c.lastStream
		c.mu.Unlock()
		if len(why) > 256 {
			why = why[:256]
		}
		sent = c.fr.WriteGoAway(last, code, []byte(why)) == nil && c.bw.Flush() == nil
	}
	c.wmu.Unlock()
	if sent && code != http2.ErrCodeNo {
		c.linger()
	}
	c.close()
}

// linger gives a GOAWAY time to arrive: closing a socket with unread
// input makes TCP reset it, and a reset peer may lose the GOAWAY before
// reading it. So half-close, then drain the input briefly (bounded in
// time and bytes: the peer may be hostile).
func (c *conn) linger() {
	if cw, ok := c.nc.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(writeGrace))
	_, _ = io.CopyN(io.Discard, c.nc, 4<<20)
}

// drain is the graceful stop: GOAWAY naming the last stream accepted, no
// new streams, and the connection closes when its last call has finished.
func (c *conn) drain() {
	c.mu.Lock()
	if c.draining {
		c.mu.Unlock()
		return
	}
	c.draining = true
	last, idle := c.lastStream, c.active == 0
	c.mu.Unlock()
	c.wmu.Lock()
	if !c.wclosed && c.fr != nil {
		if err := c.fr.WriteGoAway(last, http2.ErrCodeNo, nil); err == nil {
			err = c.bw.Flush()
			if err != nil {
				c.log.Debug().Err(err).Msg("write GOAWAY")
			}
		}
	}
	c.wmu.Unlock()
	if idle {
		c.close()
	}
}

// kill is Stop's end of a connection.
func (c *conn) kill() { c.goAwayAndClose(http2.ErrCodeNo, "server stopped") }

// keepalive pings a connection silent for KeepaliveTime and closes it if
// nothing arrives within KeepaliveTimeout after.
func (c *conn) keepalive() {
	t := time.NewTimer(c.s.cfg.KeepaliveTime)
	defer t.Stop()
	pinged := false
	for {
		select {
		case <-c.done:
			return
		case <-t.C:
		}
		if c.activity.Swap(false) {
			pinged = false
			t.Reset(c.s.cfg.KeepaliveTime)
			continue
		}
		if pinged {
			c.log.Info().Dur("timeout", c.s.cfg.KeepaliveTimeout).Msg("closing connection: keepalive ping not answered")
			if f := c.s.cfg.ConnError; f != nil {
				f("keepalive_timeout")
			}
			c.close()
			return
		}
		pinged = true
		// A writer blocked on a peer that does not read holds the write
		// lock; the ping must not hold up the timeout that ends it.
		go func() {
			c.wmu.Lock()
			defer c.wmu.Unlock()
			if c.wclosed {
				return
			}
			c.pingsOut.Add(1)
			if c.fr.WritePing(false, [8]byte{'k', 'e', 'e', 'p', 'a', 'l', 'i', 'v'}) == nil {
				_ = c.bw.Flush()
			}
		}()
		t.Reset(c.s.cfg.KeepaliveTimeout)
	}
}

// readLoop reads and handles frames until the connection ends.
func (c *conn) readLoop() error {
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				// The frame is consumed and the connection still sound:
				// only that stream fails.
				if err := c.ignoredFrame(); err != nil {
					return err
				}
				c.resetStream(se.StreamID, se.Code)
				if err := c.flushControlIfIdle(); err != nil {
					return err
				}
				continue
			}
			return err
		}
		if !c.activity.Load() {
			c.activity.Store(true)
		}
		if err := c.onFrame(f); err != nil {
			return err
		}
		if err := c.flushControlIfIdle(); err != nil {
			return err
		}
	}
}

// flushControlIfIdle sends the control frames the reader queued once
// nothing more is buffered to read, so a burst of frames costs one write.
func (c *conn) flushControlIfIdle() error {
	if c.br.Buffered() > 0 {
		return nil
	}
	return c.flushControl()
}

func (c *conn) flushControl() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.wclosed || (!c.ctrlUrgent && !c.ctrlLazy) {
		return nil
	}
	// grpc clients ping after every response they receive (to size their
	// windows); a unary call in flight will flush soon, and its response
	// carries the ACK: one write per call instead of two. Its handler is
	// bounded (the gateway's request timeout), so the ACK is not held
	// long; window updates and SETTINGS ACKs never wait.
	if !c.ctrlUrgent && c.unaryInFlight > 0 {
		return nil
	}
	c.ctrlUrgent, c.ctrlLazy = false, false
	if err := c.writeHeldAck(); err != nil {
		return fmt.Errorf("write held PING ACK: %w", err)
	}
	if err := c.bw.Flush(); err != nil {
		return fmt.Errorf("flush control frames: %w", err)
	}
	return nil
}

func (c *conn) onFrame(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.HeadersFrame:
		c.settingsSinceStream = 0
		// A block on a stream the client has used is that stream's
		// trailers (or arrives after its end).
		c.hdr = requestHeaders{id: f.StreamID, endStream: f.StreamEnded(), trailers: f.StreamID <= c.maxSeen}
		return c.onHeaderFragment(f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.ContinuationFrame:
		// The Framer has checked it continues the block being read.
		return c.onHeaderFragment(f.HeaderBlockFragment(), f.HeadersEnded())
	case *http2.DataFrame:
		return c.onData(f)
	case *http2.RSTStreamFrame:
		if f.StreamID > c.maxSeen {
			return &connError{http2.ErrCodeProtocol, fmt.Sprintf("RST_STREAM on idle stream %d", f.StreamID)}
		}
		c.onReset(f.StreamID)
		return nil
	case *http2.SettingsFrame:
		if f.IsAck() {
			// We send one SETTINGS frame, so one ACK is due.
			if c.settingsAcked {
				return c.carriesNothing(&c.flood.acks, maxUnaskedAcks, "SETTINGS or PING ACKs for nothing sent")
			}
			c.settingsAcked = true
			return nil
		}
		if c.settingsSinceStream++; c.settingsSinceStream > maxSettingsPerStream {
			return &connError{http2.ErrCodeEnhanceYourCalm, "SETTINGS flood"}
		}
		return c.onSettings(f)
	case *http2.PingFrame:
		if f.IsAck() {
			if c.pingsOut.Add(-1) < 0 {
				c.pingsOut.Add(1)
				return c.carriesNothing(&c.flood.acks, maxUnaskedAcks, "SETTINGS or PING ACKs for nothing sent")
			}
			return nil
		}
		return c.onPing(f)
	case *http2.WindowUpdateFrame:
		return c.onWindowUpdate(f)
	case *http2.GoAwayFrame:
		if c.goAwaySeen {
			return c.ignoredFrame()
		}
		c.goAwaySeen = true
		// The client leaves: finish what is in flight, accept nothing new.
		c.mu.Lock()
		c.draining = true
		idle := c.active == 0
		c.mu.Unlock()
		if idle {
			return io.EOF
		}
		return nil
	case *http2.PushPromiseFrame:
		return &connError{http2.ErrCodeProtocol, "PUSH_PROMISE from a client"}
	}
	// PRIORITY (we do not prioritise) and frames of unknown types are
	// ignored, as HTTP/2 says, but each is parsed into a fresh frame.
	return c.ignoredFrame()
}

// floodCounts counts, per kind, the frames that carry nothing that a
// client sent since it last sent something useful (a new stream, or
// data for an open one). Each such frame costs the server a parse, often
// an allocation, a lock or a frame written back, and a peer can send
// them endlessly (the empty-frame, priority and control floods of
// CVE-2019-9511..9518); past a kind's limit the connection gets GOAWAY
// ENHANCE_YOUR_CALM. SETTINGS (maxSettingsPerStream) and pings (the ping
// strikes) have rules of their own.
type floodCounts struct {
	emptyData, ignored, acks, windowUpdates int
}

// carriesNothing counts one more frame of a kind that carries nothing.
func (c *conn) carriesNothing(n *int, limit int, what string) error {
	*n++
	if *n > limit {
		return &connError{http2.ErrCodeEnhanceYourCalm, fmt.Sprintf("flood: more than %d %s with no request or data between", limit, what)}
	}
	return nil
}

func (c *conn) ignoredFrame() error {
	return c.carriesNothing(&c.flood.ignored, maxIgnored, "frames that carry nothing (PRIORITY, unknown types, repeated GOAWAY, header blocks on ended streams, malformed control frames)")
}

func (c *conn) onSettings(f *http2.SettingsFrame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	err := f.ForeachSetting(func(s http2.Setting) error {
		if err := s.Valid(); err != nil {
			return err
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			// Applies to every open stream, and may make a window negative.
			delta := int64(s.Val) - c.peerInitWin
			c.peerInitWin = int64(s.Val)
			c.mu.Lock()
			for _, st := range c.streams {
				st.sendWin += delta
				if st.sendWin > maxWindow {
					c.mu.Unlock()
					return http2.ConnectionError(http2.ErrCodeFlowControl)
				}
			}
			c.mu.Unlock()
			c.wcond.Broadcast()
		case http2.SettingMaxFrameSize:
			c.peerMaxFrame = s.Val
		case http2.SettingHeaderTableSize:
			c.henc.SetMaxDynamicTableSizeLimit(s.Val)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.ctrlUrgent = true
	return c.fr.WriteSettingsAck()
}

// onPing answers a ping, enforcing the minimum interval like grpc-go's
// keepalive.EnforcementPolicy{MinTime, PermitWithoutStream: true}.
func (c *conn) onPing(f *http2.PingFrame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	now := time.Now()
	if c.resetPingStrikes {
		c.pingStrikes = 0
		c.lastPingAt = time.Time{}
		c.resetPingStrikes = false
	}
	if !c.lastPingAt.IsZero() && now.Sub(c.lastPingAt) < c.s.cfg.MinPingInterval {
		c.pingStrikes++
	}
	c.lastPingAt = now
	if c.pingStrikes > maxPingStrikes {
		return &connError{http2.ErrCodeEnhanceYourCalm, "too_many_pings"}
	}
	return c.holdAck(f.Data, now)
}

// ackHold bounds how long a PING ACK waits for a response to ride behind.
// grpc clients ping after every response they receive (to size their
// windows). An ACK written at once is a write of its own whenever no call
// is in flight: at low load, one more write per call, and one more read
// of the client's next ping, which it sends as soon as the ACK comes. An
// ACK behind the next response goes in that response's write, and the
// client, which sees it after the response's DATA, pings only after the
// next one: half the pings. Keepalive pings wait too; their senders allow
// seconds (grpc's default is 20 s).
const ackHold = 100 * time.Millisecond

// holdAck keeps a PING ACK for the next flush (wmu held). A second ping
// while one is held has its predecessor's ACK written at once: ACKs keep
// their order.
func (c *conn) holdAck(data [8]byte, now time.Time) error {
	if c.ackHeld() {
		if err := c.fr.WritePing(true, c.ackData); err != nil {
			return err
		}
		c.ctrlLazy = true
	}
	c.ackData = data
	c.ackSince.Store(now.UnixNano())
	if !c.ackListed {
		// Listed once until the sweeper finds it holding nothing: a ping
		// costs no server-wide lock.
		c.ackListed = true
		c.s.holdingAck(c)
	}
	return nil
}

// ackHeld reports whether a PING ACK waits for the next response.
func (c *conn) ackHeld() bool { return c.ackSince.Load() != 0 }

// writeHeldAck buffers a held PING ACK behind what is buffered (wmu held).
func (c *conn) writeHeldAck() error {
	if !c.ackHeld() || c.wclosed {
		return nil
	}
	c.ackSince.Store(0)
	return c.fr.WritePing(true, c.ackData)
}

// sweepAck sends c's held ACK if it has waited ackHold.
func (c *conn) sweepAck(now time.Time) {
	defer c.sweeping.Store(false)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.wclosed {
		// Nothing will carry it: forget it, and the next round unlists c.
		c.ackSince.Store(0)
		return
	}
	if at := c.ackSince.Load(); at != 0 && now.UnixNano()-at >= int64(ackHold) {
		if c.writeHeldAck() == nil {
			_ = c.bw.Flush()
		}
	}
}

// unlistIfIdle takes c off the server's held set if it holds no ACK, or
// is closed (ackMu held). It never waits for the write lock: a connection
// that is writing stays listed until the next round.
func (c *conn) unlistIfIdle() {
	if !c.wmu.TryLock() {
		return
	}
	if !c.ackHeld() || c.wclosed {
		c.ackListed = false
		delete(c.s.held, c)
	}
	c.wmu.Unlock()
}

// holdingAck lists c as holding an ACK, and starts the sweeper if it is
// not running (c.wmu held: wmu comes before ackMu, and the sweeper only
// tries wmu while it holds ackMu).
func (s *Server) holdingAck(c *conn) {
	s.ackMu.Lock()
	defer s.ackMu.Unlock()
	if s.held == nil {
		s.held = make(map[*conn]struct{})
	}
	s.held[c] = struct{}{}
	if !s.sweeping {
		s.sweeping = true
		go s.sweepAcks()
	}
}

// sweepAcks flushes the ACKs no response has carried within ackHold. It
// runs only while some connection holds one: one wake-up per ackHold for
// the whole server, not a timer per ping.
func (s *Server) sweepAcks() {
	t := time.NewTicker(ackHold)
	defer t.Stop()
	var conns []*conn
	for range t.C {
		now := time.Now()
		s.ackMu.Lock()
		conns = conns[:0]
		for c := range s.held {
			if at := c.ackSince.Load(); at != 0 && now.UnixNano()-at >= int64(ackHold) {
				conns = append(conns, c)
			} else if at == 0 {
				c.unlistIfIdle()
			}
		}
		s.ackMu.Unlock()
		for _, c := range conns {
			// The flush runs on a goroutine of its own (one per connection
			// at a time): a writer blocked on a peer that does not read
			// holds the write lock, and the sweeper must not wait for it.
			if c.sweeping.CompareAndSwap(false, true) {
				go c.sweepAck(now)
			}
		}
		s.ackMu.Lock()
		if len(s.held) == 0 {
			s.sweeping = false
			s.ackMu.Unlock()
			return
		}
		s.ackMu.Unlock()
	}
}

func (c *conn) onWindowUpdate(f *http2.WindowUpdateFrame) error {
	if f.StreamID > c.maxSeen {
		return &connError{http2.ErrCodeProtocol, fmt.Sprintf("WINDOW_UPDATE on idle stream %d", f.StreamID)}
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	// Clients return window as they receive DATA: a WINDOW_UPDATE or two
	// per DATA frame. Many with no DATA sent in between carry nothing.
	if c.dataSinceWU {
		c.dataSinceWU = false
		c.flood.windowUpdates = 0
	}
	if err := c.carriesNothing(&c.flood.windowUpdates, maxWindowUpdates, "WINDOW_UPDATE frames"); err != nil {
		return err
	}
	if f.StreamID == 0 {
		if c.sendWin+int64(f.Increment) > maxWindow {
			return &connError{http2.ErrCodeFlowControl, "connection window overflow"}
		}
		c.sendWin += int64(f.Increment)
		c.wcond.Broadcast()
		return nil
	}
	c.mu.Lock()
	st := c.streams[f.StreamID]
	c.mu.Unlock()
	if st == nil {
		return nil // a stream that has ended; frames may cross
	}
	if st.sendWin+int64(f.Increment) > maxWindow {
		c.resetStreamLocked(st, http2.ErrCodeFlowControl)
		return nil
	}
	st.sendWin += int64(f.Increment)
	c.wcond.Broadcast()
	return nil
}

// onHeaders opens a stream: a call's request headers.
func (c *conn) onHeaders(h *requestHeaders) error {
	id := h.id
	if id%2 == 0 {
		return &connError{http2.ErrCodeProtocol, fmt.Sprintf("client opened even stream %d", id)}
	}
	if h.trailers {
		return c.onTrailers(h)
	}
	c.maxSeen = id
	c.flood = floodCounts{}
	h.checkComplete()
	c.mu.Lock()
	if c.draining {
		c.mu.Unlock()
		c.writeReset(id, http2.ErrCodeRefusedStream)
		return nil
	}
	c.lastStream = id
	if h.malformed != "" {
		// A malformed request is an error of its stream only (RFC 9113
		// section 8.1.1): the connection and its other calls go on.
		c.mu.Unlock()
		c.log.Debug().Uint32("stream", id).Str("reason", h.malformed).Msg("malformed request: stream reset")
		c.writeReset(id, http2.ErrCodeProtocol)
		return nil
	}
	// A handler's stream counts until its last frames are written, but the
	// client counts it closed as soon as it reads them; so a client at the
	// limit may open the next stream a moment early. Finishing handlers
	// are allowed for, up to the limit again (they may wait for window).
	if limit := c.s.cfg.MaxConcurrentStreams; c.active >= limit && (c.active-c.finishing >= limit || c.active >= 2*limit) {
		c.mu.Unlock()
		c.writeReset(id, http2.ErrCodeRefusedStream)
		return nil
	}
	c.mu.Unlock()

	if h.truncated {
		c.log.Warn().Uint32("stream", id).Uint32("limit", c.s.cfg.MaxHeaderListSize).Msg("request header list too large")
		c.respondEarly(id, h.endStream, "431", codes.ResourceExhausted, "header list too large")
		return nil
	}
	method, path, ctype, timeout, encoding := h.method, h.path, h.ctype, h.timeout, h.encoding
	if method != "POST" {
		c.respondEarly(id, h.endStream, "405", codes.Internal, "method "+method+" not allowed")
		return nil
	}
	if !isGRPCContentType(ctype) {
		c.respondEarly(id, h.endStream, "415", codes.Internal, "invalid gRPC request content-type "+fmt.Sprintf("%q", ctype))
		return nil
	}
	var bidi bool
	switch path {
	case UnaryMethod:
	case StreamMethod:
		bidi = true
	default:
		c.respondEarly(id, h.endStream, "200", codes.Unimplemented, "unknown method "+path)
		return nil
	}
	if h.badBin != "" {
		c.respondEarly(id, h.endStream, "400", codes.Internal, fmt.Sprintf("malformed binary metadata in header %.64q", h.badBin))
		return nil
	}
	if encoding != "" && encoding != "identity" {
		c.respondEarly(id, h.endStream, "200", codes.Unimplemented, "compression "+encoding+" is not supported")
		return nil
	}
	var limit time.Duration // 0: none
	if timeout != "" {
		d, ok := parseTimeout(timeout)
		if !ok {
			c.respondEarly(id, h.endStream, "200", codes.Internal, "malformed grpc-timeout "+fmt.Sprintf("%q", timeout))
			return nil
		}
		limit = max(d, time.Nanosecond) // a zero timeout has passed already
	}
	if m := c.s.cfg.MaxCallDuration; m > 0 && !bidi && (limit == 0 || m < limit) {
		limit = m
	}
	st := &stream{c: c, id: id, bidi: bidi, md: h.md}
	st.hctx = callCtx{c.ctx, st}
	var now time.Time
	if limit > 0 {
		now = time.Now()
		st.life.deadline = now.Add(limit)
	}
	st.recvWin.Store(streamWindow)
	if bidi {
		st.qready = make(chan struct{}, 1)
	}
	c.wmu.Lock()
	st.sendWin = c.peerInitWin
	if !bidi {
		st.countedUnary = true
		c.unaryInFlight++
	}
	c.mu.Lock()
	c.streams[id] = st
	c.active++
	c.watchDeadlineLocked(st, now)
	c.mu.Unlock()
	c.wmu.Unlock()
	if c.isClosed() {
		// The connection's close may have ended its live calls
		// (endLiveCalls) before this one was among them.
		st.cancel()
	}

	if h.endStream {
		st.halfClosed.Store(true)
		if !bidi {
			// A unary call without its message.
			c.abort(st, codes.Internal, "grpc: request ended without a message")
			return nil
		}
		st.deliver(nil, io.EOF)
	}
	if bidi {
		st.dispatched = true
		c.s.dispatch(st)
	}
	return nil
}

// onTrailers takes a header block on a stream the client has used: the
// request's trailers, which end it (gRPC clients send none, but HTTP/2
// allows them). A block on a stream that has ended is ignored (RFC 9113
// section 5.1: frames may cross our RST_STREAM).
func (c *conn) onTrailers(h *requestHeaders) error {
	c.mu.Lock()
	st := c.streams[h.id]
	c.mu.Unlock()
	switch {
	case st == nil:
		return c.ignoredFrame()
	case st.halfClosed.Load():
		c.resetStream(h.id, http2.ErrCodeStreamClosed)
	case !h.endStream:
		c.log.Debug().Uint32("stream", h.id).Msg("malformed request: trailers without END_STREAM")
		c.resetStream(h.id, http2.ErrCodeProtocol)
	case h.malformed != "":
		c.log.Debug().Uint32("stream", h.id).Str("reason", h.malformed).Msg("malformed request trailers: stream reset")
		c.resetStream(h.id, http2.ErrCodeProtocol)
	case st.bidi:
		c.onStreamData(st, nil, true)
	default:
		return c.onUnaryData(st, nil, 0, true)
	}
	return nil
}

func isGRPCContentType(ct string) bool {
	const base = "application/grpc"
	if len(ct) < len(base) || ct[:len(base)] != base {
		return false
	}
	return len(ct) == len(base) || ct[len(base)] == '+' || ct[len(base)] == ';'
}

func (c *conn) onData(f *http2.DataFrame) error {
	n := f.Header().Length // padding counts for flow control
	c.recvWin -= int64(n)
	if c.recvWin < 0 {
		return &connError{http2.ErrCodeFlowControl, "client overran the connection window"}
	}
	// The connection window comes back as data is read: what a stream may
	// hold is bounded by its own window.
	c.recvUnacked += n
	if c.recvUnacked >= connWindow/4 {
		if err := c.writeWindowUpdate(0, c.recvUnacked); err != nil {
			return err
		}
		c.recvWin += int64(c.recvUnacked)
		c.recvUnacked = 0
	}
	data := f.Data()
	empty := len(data) == 0 && !f.StreamEnded()
	if empty {
		if err := c.carriesNothing(&c.flood.emptyData, maxEmptyData, "empty DATA frames (no payload, no END_STREAM)"); err != nil {
			return err
		}
	}
	id := f.StreamID
	c.mu.Lock()
	st := c.streams[id]
	c.mu.Unlock()
	if st == nil {
		if id > c.maxSeen {
			return &connError{http2.ErrCodeProtocol, fmt.Sprintf("DATA on idle stream %d", id)}
		}
		return nil // a stream that has ended; frames may cross
	}
	if st.halfClosed.Load() {
		c.resetStream(id, http2.ErrCodeStreamClosed)
		return nil
	}
	if st.recvWin.Add(-int64(n)) < 0 {
		c.resetStream(id, http2.ErrCodeFlowControl)
		return nil
	}
	if !empty {
		c.flood = floodCounts{} // data for an open stream
	}
	if pad := n - uint32(len(data)); pad > 0 && !f.StreamEnded() {
		if err := c.writeWindowUpdate(id, pad); err != nil {
			return err
		}
		st.recvWin.Add(int64(pad))
	}
	if st.bidi {
		c.onStreamData(st, data, f.StreamEnded())
		return nil
	}
	return c.onUnaryData(st, data, n, f.StreamEnded())
}

// onUnaryData buffers a unary request and starts its handler once the
// client has sent all of it.
func (c *conn) onUnaryData(st *stream, data []byte, n uint32, end bool) error {
	if st.aborted {
		return nil
	}
	// Unary requests are buffered whole before their handler runs; what a
	// connection may have buffered so is bounded, or a client could open
	// every stream it may and fill each up to the message limit.
	if c.pendingReq+len(data) > c.s.maxPendingReq() {
		c.abort(st, codes.ResourceExhausted, fmt.Sprintf("grpc: more than %d bytes of requests buffered on the connection", c.s.maxPendingReq()))
		return nil
	}
	if st.req == nil {
		st.req = getBuf(len(data))
	}
	*st.req = append(*st.req, data...)
	c.pendingReq += len(data)
	st.pendingReq += len(data)
	buf := *st.req
	if len(buf) >= 5 {
		if buf[0] != 0 {
			c.abort(st, codes.Unimplemented, "grpc: compressed messages are not supported")
			return nil
		}
		size := msgLen(buf)
		if size > uint64(c.s.cfg.MaxRecvMsgSize) {
			c.abort(st, codes.ResourceExhausted, fmt.Sprintf("grpc: received message larger than max (%d vs. %d)", size, c.s.cfg.MaxRecvMsgSize))
			return nil
		}
		if uint64(len(buf)-5) > size {
			c.abort(st, codes.Internal, "grpc: more than one request message on a unary call")
			return nil
		}
	}
	if !end {
		// Buffered whole anyway: give the window back at once.
		st.recvUnacked += n
		if st.recvUnacked >= streamWindow/4 {
			if err := c.writeWindowUpdate(st.id, st.recvUnacked); err != nil {
				return err
			}
			st.recvWin.Add(int64(st.recvUnacked))
			st.recvUnacked = 0
		}
		return nil
	}
	st.halfClosed.Store(true)
	if len(buf) < 5 || uint64(len(buf)-5) != msgLen(buf) {
		c.abort(st, codes.Internal, "grpc: request ended inside its message")
		return nil
	}
	st.dispatched = true
	c.pendingReq -= st.pendingReq
	c.s.dispatch(st)
	return nil
}

// onStreamData splits a stream's data into messages for Recv.
func (c *conn) onStreamData(st *stream, data []byte, end bool) {
	if st.aborted {
		return
	}
	st.rbuf = append(st.rbuf, data...)
	for len(st.rbuf) >= 5 {
		if st.rbuf[0] != 0 {
			c.abort(st, codes.Unimplemented, "grpc: compressed messages are not supported")
			return
		}
		size := msgLen(st.rbuf)
		if size > uint64(c.s.cfg.MaxRecvMsgSize) {
			c.abort(st, codes.ResourceExhausted, fmt.Sprintf("grpc: received message larger than max (%d vs. %d)", size, c.s.cfg.MaxRecvMsgSize))
			return
		}
		if uint64(len(st.rbuf)-5) < size {
			break
		}
		msg := make([]byte, size)
		copy(msg, st.rbuf[5:5+size])
		st.rbuf = st.rbuf[:copy(st.rbuf, st.rbuf[5+size:])]
		st.deliver(msg, nil)
	}
	if end {
		st.halfClosed.Store(true)
		if len(st.rbuf) > 0 {
			c.abort(st, codes.Internal, "grpc: stream ended inside a message")
			return
		}
		st.deliver(nil, io.EOF)
	}
}

func msgLen(b []byte) uint64 {
	return uint64(b[1])<<24 | uint64(b[2])<<16 | uint64(b[3])<<8 | uint64(b[4])
}

// onReset is the client's RST_STREAM: the call's context ends; a handler
// still running finishes on its own, still counted against the limit.
func (c *conn) onReset(id uint32) {
	c.mu.Lock()
	st := c.streams[id]
	c.mu.Unlock()
	if st == nil {
		return
	}
	c.wmu.Lock()
	st.reset = true
	c.wcond.Broadcast()
	c.wmu.Unlock()
	c.endStream(st)
}

// endStream ends a call that the client or its request failed: its
// context, its Recv, and its slot if no handler runs to free it.
func (c *conn) endStream(st *stream) {
	st.cancel()
	if st.bidi {
		st.deliver(nil, errCanceled)
	}
	if !st.dispatched {
		st.release()
	}
}

// resetStream ends a stream with RST_STREAM(code) because of the client.
func (c *conn) resetStream(id uint32, code http2.ErrCode) {
	c.mu.Lock()
	st := c.streams[id]
	c.mu.Unlock()
	if st == nil {
		c.writeReset(id, code)
		return
	}
	c.wmu.Lock()
	c.resetStreamLocked(st, code)
	c.wmu.Unlock()
	c.endStream(st)
}

func (c *conn) resetStreamLocked(st *stream, code http2.ErrCode) {
	if !st.finished && !c.wclosed {
		st.finished = true
		c.ctrlUrgent = true
		_ = c.fr.WriteRSTStream(st.id, code)
	}
	st.reset = true
	c.wcond.Broadcast()
}

func (c *conn) writeReset(id uint32, code http2.ErrCode) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if !c.wclosed {
		c.ctrlUrgent = true
		_ = c.fr.WriteRSTStream(id, code)
	}
}

func (c *conn) writeWindowUpdate(id, n uint32) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.wclosed {
		return nil
	}
	c.ctrlUrgent = true
	if err := c.fr.WriteWindowUpdate(id, n); err != nil {
		return fmt.Errorf("write WINDOW_UPDATE: %w", err)
	}
	return nil
}

// respondEarly answers a stream refused at its headers with a
// trailers-only response (HTTP status and gRPC status), and tells the
// client to stop sending if it has more.
func (c *conn) respondEarly(id uint32, ended bool, httpStatus string, code codes.Code, msg string) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.wclosed {
		return
	}
	c.ctrlUrgent = true
	if err := c.writeTrailersOnly(id, httpStatus, code, msg); err != nil {
		return
	}
	if !ended {
		_ = c.fr.WriteRSTStream(id, http2.ErrCodeNo)
	}
}

// abort fails a call because of its request (too large, compressed,
// malformed): its status goes out now, the client is told to stop sending
// and the handler, if running, sees its context end.
func (c *conn) abort(st *stream, code codes.Code, msg string) {
	c.log.Debug().Uint32("stream", st.id).Str("code", code.String()).Str("reason", msg).Msg("call aborted")
	st.aborted = true
	c.wmu.Lock()
	if !st.finished && !c.wclosed {
		st.finished = true
		c.ctrlUrgent = true
		var err error
		if st.headersSent {
			err = c.writeTrailers(st.id, code, msg)
		} else {
			err = c.writeTrailersOnly(st.id, "200", code, msg)
		}
		if err == nil && !st.halfClosed.Load() {
			_ = c.fr.WriteRSTStream(st.id, http2.ErrCodeNo)
		}
	}
	st.reset = true
	c.wcond.Broadcast()
	c.wmu.Unlock()
	c.endStream(st)
}

// removeStream forgets a stream and frees its slot; the last one closes a
// draining connection.
func (c *conn) removeStream(st *stream) {
	c.mu.Lock()
	if c.streams[st.id] == st {
		delete(c.streams, st.id)
	}
	c.active--
	if st.finishing {
		c.finishing--
	}
	closeNow := c.draining && c.active == 0
	idle := c.readerDone && c.active == 0
	if idle {
		close(c.idle)
	}
	c.mu.Unlock()
	if closeNow {
		c.close()
	}
}

// writeHeaderBlock writes header fields as HEADERS (+ CONTINUATION) on
// stream id, within the client's frame size. Under wmu.
func (c *conn) writeHeaderBlock(id uint32, end bool, fields ...hpack.HeaderField) error {
	c.hbuf.Reset()
	for _, f := range fields {
		if err := c.henc.WriteField(f); err != nil {
			return fmt.Errorf("encode header %s: %w", f.Name, err)
		}
	}
	block := c.hbuf.Bytes()
	first := block[:min(len(block), int(c.peerMaxFrame))]
	block = block[len(first):]
	err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: first, EndStream: end, EndHeaders: len(block) == 0})
	for err == nil && len(block) > 0 {
		frag := block[:min(len(block), int(c.peerMaxFrame))]
		block = block[len(frag):]
		err = c.fr.WriteContinuation(id, len(block) == 0, frag)
	}
	if err != nil {
		return fmt.Errorf("write headers: %w", err)
	}
	return nil
}

var (
	hdrStatus200   = hpack.HeaderField{Name: ":status", Value: "200"}
	hdrContentType = hpack.HeaderField{Name: "content-type", Value: "application/grpc"}
	hdrStatusOK    = hpack.HeaderField{Name: "grpc-status", Value: "0"}
)

func (c *conn) writeResponseHeaders(id uint32) error {
	return c.writeHeaderBlock(id, false, hdrStatus200, hdrContentType)
}

func (c *conn) writeTrailers(id uint32, code codes.Code, msg string) error {
	if code == codes.OK && msg == "" {
		return c.writeHeaderBlock(id, true, hdrStatusOK)
	}
	return c.writeHeaderBlock(id, true, statusField(code), messageField(msg))
}

func (c *conn) writeTrailersOnly(id uint32, httpStatus string, code codes.Code, msg string) error {
	st := hdrStatus200
	if httpStatus != "200" {
		st = hpack.HeaderField{Name: ":status", Value: httpStatus}
	}
	return c.writeHeaderBlock(id, true, st, hdrContentType, statusField(code), messageField(msg))
}
