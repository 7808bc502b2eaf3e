package h2grpc

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"nacos-lockd/protocol/pb"
)

// stream is one call. For the bidi method it is also the handler's
// grpc.BidiStreamingServer.
type stream struct {
	c    *conn
	id   uint32
	bidi bool
	life callLife // the call's deadline and cancellation

	// Reader-owned until dispatch (unary) or for good (bidi).
	req         *[]byte // unary: the framed request, pooled
	rbuf        []byte  // bidi: a message not yet complete
	recvUnacked uint32  // unary: stream window to return
	pendingReq  int     // unary: bytes counted in c.pendingReq
	dispatched  bool    // a handler runs and will release the stream
	aborted     bool    // failed by its request; further data is dropped

	halfClosed atomic.Bool  // the client sent END_STREAM
	recvWin    atomic.Int64 // what the client may still send on the stream

	// Under c.wmu.
	sendWin     int64 // the client's window for our DATA
	headersSent bool
	finished    bool // trailers or RST_STREAM written: nothing more may be
	reset       bool // ended by the client or by a failure: writes stop

	// The bidi receive queue (bounded by the stream window, which comes
	// back only as Recv takes messages).
	qmu      sync.Mutex
	q        [][]byte
	qerr     error
	qready   chan struct{}
	consumed uint32 // bytes Recv took, not yet returned as window

	// What the handler sees: its context, and the request's metadata
	// (set before the handler starts, read-only after).
	hctx callCtx
	md   mdFields
	inMD lazyMD

	countedUnary bool        // in c.unaryInFlight (under c.wmu)
	replied      atomic.Bool // TryReply wrote the response
	releaseOnce  sync.Once
	finishing    bool // counted in c.finishing (under c.mu)
}

var _ grpc.BidiStreamingServer[pb.Payload, pb.Payload] = (*stream)(nil)

var (
	errCanceled   = status.Error(codes.Canceled, "grpc: the client cancelled the stream")
	errConnClosed = status.Error(codes.Unavailable, "grpc: the connection is closing")
	errStreamDone = status.Error(codes.Canceled, "grpc: the stream has ended")
)

// run is the handler goroutine's work.
func (st *stream) run() {
	defer st.release()
	if st.bidi {
		err := st.c.s.h.Stream(st)
		code, msg := statusOf(err)
		st.markFinishing()
		_ = st.write(nil, true, code, msg)
		return
	}
	req := new(pb.Payload)
	err := unmarshalPayload((*st.req)[5:], req)
	putBuf(st.req)
	st.req = nil
	if err != nil {
		_ = st.write(nil, true, codes.Internal, "grpc: error unmarshalling request: "+err.Error())
		return
	}
	resp, err := st.c.s.h.Unary(&st.hctx, req)
	st.markFinishing()
	if st.replied.Load() {
		return // TryReply wrote the response
	}
	if err != nil {
		code, msg := statusOf(err)
		_ = st.write(nil, true, code, msg)
		return
	}
	buf, err := st.c.s.marshal(resp)
	if err != nil {
		code, msg := statusOf(err)
		_ = st.write(nil, true, code, msg)
		return
	}
	_ = st.write(*buf, true, codes.OK, "")
	putBuf(buf)
}

// cancel ends the call's context (a no-op once it has ended).
func (st *stream) cancel() { st.life.end(context.Canceled) }

// markFinishing notes that the handler has returned (see onHeaders).
func (st *stream) markFinishing() {
	c := st.c
	c.mu.Lock()
	st.finishing = true
	c.finishing++
	c.mu.Unlock()
}

// release frees the stream's slot once: after its handler, or when it
// ends before one started.
func (st *stream) release() {
	st.releaseOnce.Do(func() {
		st.cancel()
		st.c.wmu.Lock()
		st.uncountLocked()
		st.c.wmu.Unlock()
		if !st.dispatched {
			// Only the reader releases a stream without a handler.
			st.c.pendingReq -= st.pendingReq
			if st.req != nil {
				putBuf(st.req)
				st.req = nil
			}
		}
		st.c.removeStream(st)
	})
}

func statusOf(err error) (codes.Code, string) {
	if err == nil {
		return codes.OK, ""
	}
	s, ok := status.FromError(err)
	if !ok {
		// As grpc-go's server: a context error keeps its code, any other
		// error is Unknown with its text.
		s = status.FromContextError(err)
	}
	return s.Code(), s.Message()
}

// marshal frames a message (5-byte prefix) into a pooled buffer.
func (s *Server) marshal(p *pb.Payload) (*[]byte, error) {
	size := proto.Size(p)
	if size > s.cfg.MaxSendMsgSize {
		return nil, status.Errorf(codes.ResourceExhausted, "grpc: trying to send message larger than max (%d vs. %d)", size, s.cfg.MaxSendMsgSize)
	}
	buf := getBuf(5 + size)
	b := append((*buf)[:0], 0, 0, 0, 0, 0)
	b, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(b, p)
	if err != nil {
		putBuf(buf)
		return nil, status.Errorf(codes.Internal, "grpc: error marshalling response: %v", err)
	}
	binary.BigEndian.PutUint32(b[1:5], uint32(len(b)-5))
	*buf = b
	return buf, nil
}

// write sends the response headers (once), then data (a framed message)
// within the flow-control windows, then, with end, the trailers carrying
// code and msg, and flushes: one write syscall for a whole unary response.
// A push to a client that does not read waits here for its window.
func (st *stream) write(data []byte, end bool, code codes.Code, msg string) error {
	st.c.wmu.Lock()
	defer st.c.wmu.Unlock()
	return st.writeLocked(data, end, code, msg)
}

// writeLocked is write with c.wmu held.
func (st *stream) writeLocked(data []byte, end bool, code codes.Code, msg string) error {
	c := st.c
	if end {
		st.uncountLocked()
	}
	if err := st.writableLocked(); err != nil {
		return err
	}
	if !st.headersSent && data == nil && end {
		st.finished = true
		err := c.writeTrailersOnly(st.id, "200", code, msg)
		if err == nil && !st.halfClosed.Load() {
			err = c.fr.WriteRSTStream(st.id, http2.ErrCodeNo)
		}
		return c.flushLocked(err)
	}
	if !st.headersSent {
		st.headersSent = true
		if err := c.writeResponseHeaders(st.id); err != nil {
			return c.flushLocked(err)
		}
	}
	var stopWake func() bool
	defer func() {
		if stopWake != nil {
			stopWake()
		}
	}()
	for len(data) > 0 {
		for st.sendWin <= 0 || c.sendWin <= 0 {
			if err := st.writableLocked(); err != nil {
				return err
			}
			if st.life.Err() != nil {
				// The call is over and the message cannot be finished.
				st.finished, st.reset = true, true
				// flushLocked flushes only after no error: the RST must
				// go out now, not with whatever is written next.
				if err := c.flushLocked(c.fr.WriteRSTStream(st.id, http2.ErrCodeCancel)); err != nil {
					return err
				}
				return errStreamDone
			}
			// The client must see what is written before it returns window.
			if err := c.bw.Flush(); err != nil {
				return fmt.Errorf("flush: %w", err)
			}
			if stopWake == nil {
				stopWake = context.AfterFunc(&st.hctx, func() {
					c.wmu.Lock()
					c.wcond.Broadcast()
					c.wmu.Unlock()
				})
			}
			c.windowWaits++
			c.wcond.Wait()
			c.windowWaits--
		}
		if err := st.writableLocked(); err != nil {
			return err
		}
		n := min(int64(len(data)), int64(c.peerMaxFrame), st.sendWin, c.sendWin)
		st.sendWin -= n
		c.sendWin -= n
		if err := c.fr.WriteData(st.id, false, data[:n]); err != nil {
			return c.flushLocked(err)
		}
		c.dataSinceWU = true
		data = data[n:]
	}
	c.resetPingStrikes = true
	if end {
		st.finished = true
		err := c.writeTrailers(st.id, code, msg)
		if err == nil && !st.halfClosed.Load() {
			// The call is over: the client need not send the rest.
			err = c.fr.WriteRSTStream(st.id, http2.ErrCodeNo)
		}
		return c.flushLocked(err)
	}
	return c.flushLocked(nil)
}

// uncountLocked takes a unary call out of c.unaryInFlight; if it was
// the last, PING ACKs left for its response go out now if nothing else
// flushes them (see flushControl).
func (st *stream) uncountLocked() {
	c := st.c
	if !st.countedUnary {
		return
	}
	st.countedUnary = false
	c.unaryInFlight--
	if c.unaryInFlight == 0 && c.ctrlLazy && !c.wclosed && (st.reset || st.finished) {
		_ = c.flushLocked(nil)
	}
}

func (st *stream) writableLocked() error {
	switch {
	case st.c.wclosed:
		return errConnClosed
	case st.reset, st.finished:
		return errStreamDone
	}
	return nil
}

// flushLocked flushes what is buffered (the reader's control frames too),
// after err, the error of the writes before it.
func (c *conn) flushLocked(err error) error {
	if err == nil {
		err = c.writeHeldAck() // behind the response: see ackHold
	}
	if err == nil {
		err = c.bw.Flush()
	}
	if err != nil {
		return fmt.Errorf("write stream: %w", err)
	}
	c.ctrlUrgent, c.ctrlLazy = false, false
	return nil
}

// deliver queues a message (or the end of the client's side) for Recv.
func (st *stream) deliver(msg []byte, err error) {
	st.qmu.Lock()
	if st.qerr == nil {
		if msg != nil {
			st.q = append(st.q, msg)
		}
		if err != nil {
			st.qerr = err
		}
	}
	st.qmu.Unlock()
	select {
	case st.qready <- struct{}{}:
	default:
	}
}

// Recv returns the client's next message, io.EOF once it has closed its
// side, or an error when the call ends.
func (st *stream) Recv() (*pb.Payload, error) {
	m := new(pb.Payload)
	if err := st.RecvMsg(m); err != nil {
		return nil, err
	}
	return m, nil
}

// RecvMsg is Recv into m, which must be a *pb.Payload.
func (st *stream) RecvMsg(m any) error {
	p, ok := m.(*pb.Payload)
	if !ok {
		return status.Errorf(codes.Internal, "h2grpc: RecvMsg into %T, want *pb.Payload", m)
	}
	for {
		st.qmu.Lock()
		if len(st.q) > 0 {
			msg := st.q[0]
			st.q[0] = nil
			st.q = st.q[1:]
			st.consumed += uint32(5 + len(msg))
			var inc uint32
			if st.consumed >= streamWindow/4 {
				inc, st.consumed = st.consumed, 0
			}
			st.qmu.Unlock()
			if inc > 0 {
				st.returnWindow(inc)
			}
			if err := unmarshalPayload(msg, p); err != nil {
				return status.Errorf(codes.Internal, "grpc: error unmarshalling message: %v", err)
			}
			return nil
		}
		err := st.qerr
		st.qmu.Unlock()
		if err != nil {
			return err
		}
		select {
		case <-st.qready:
		case <-st.life.Done():
			if errors.Is(st.life.Err(), context.DeadlineExceeded) {
				return status.Error(codes.DeadlineExceeded, "grpc: the call's deadline passed")
			}
			return errCanceled
		}
	}
}

// returnWindow gives the client back stream window Recv has consumed.
func (st *stream) returnWindow(n uint32) {
	c := st.c
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.wclosed || st.finished || st.halfClosed.Load() {
		return
	}
	st.recvWin.Add(int64(n))
	if c.fr.WriteWindowUpdate(st.id, n) == nil {
		_ = c.flushLocked(nil)
	}
}

// Send pushes a message to the client, waiting for flow-control window.
// Not safe to call from two goroutines at once (as for grpc-go).
func (st *stream) Send(p *pb.Payload) error {
	buf, err := st.c.s.marshal(p)
	if err != nil {
		return err
	}
	err = st.write(*buf, false, codes.OK, "")
	putBuf(buf)
	return err
}

// SendMsg is Send of m, which must be a *pb.Payload.
func (st *stream) SendMsg(m any) error {
	p, ok := m.(*pb.Payload)
	if !ok {
		return status.Errorf(codes.Internal, "h2grpc: SendMsg of %T, want *pb.Payload", m)
	}
	return st.Send(p)
}

// Context is the call's context (peer, deadline, cancellation, incoming
// metadata).
func (st *stream) Context() context.Context { return &st.hctx }

// SetHeader, SendHeader and SetTrailer: response metadata is not carried
// (the gateway sets none). SetHeader and SendHeader with metadata return
// an Unimplemented error; SendHeader without sends the response headers
// now. SetTrailer, which cannot return an error, drops what it is given.
func (st *stream) SetHeader(md metadata.MD) error {
	if md.Len() == 0 {
		return nil
	}
	return errResponseMetadata
}

func (st *stream) SendHeader(md metadata.MD) error {
	if md.Len() > 0 {
		return errResponseMetadata
	}
	c := st.c
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if err := st.writableLocked(); err != nil {
		return err
	}
	if st.headersSent {
		return status.Error(codes.Internal, "grpc: headers already sent")
	}
	st.headersSent = true
	return c.flushLocked(c.writeResponseHeaders(st.id))
}

func (st *stream) SetTrailer(metadata.MD) {}

// Pooled message buffers: a lock request and its response are a few
// hundred bytes; large ones are not kept.
const maxPooledBuf = 64 << 10

var bufPool = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

func getBuf(n int) *[]byte {
	b := bufPool.Get().(*[]byte)
	if cap(*b) < n {
		*b = make([]byte, 0, n)
	}
	*b = (*b)[:0]
	return b
}

func putBuf(b *[]byte) {
	if cap(*b) > maxPooledBuf {
		return
	}
	bufPool.Put(b)
}

// TryReply writes the response of a unary call from a goroutine other
// than its handler's, if it can do so without waiting for anything: the
// connection's write lock is free, the client's windows take the whole
// message, and nothing written earlier is still waiting for the socket.
// The socket gets writes that do not wait, one per piece the
// connection's buffer hands it (one for a message that fits the buffer);
// whatever it does not take goes out from another goroutine, ahead of any
// later frame. It reports whether it wrote; then the response the handler
// returns is dropped. Otherwise nothing was written, and the handler answers.
//
// It is for a caller that must not block: the gateway answers a waiter's
// claim from Raft's apply goroutine the moment the grant applies
// (gateway/DESIGN.md, "Claims answered from a read"). ctx is the
// handler's own context; any other (a call of another transport, a
// context derived from the handler's) gets false, as does a TLS
// connection, whose records cannot be written part way.
func TryReply(ctx context.Context, p *pb.Payload) bool {
	if !CanTryReply(ctx) {
		return false
	}
	st := ctx.(*callCtx).st
	c := st.c
	buf, err := c.s.marshal(p)
	if err != nil {
		return false
	}
	defer putBuf(buf)
	if !c.wmu.TryLock() {
		return false
	}
	defer c.wmu.Unlock()
	n := int64(len(*buf))
	if st.writableLocked() != nil || len(c.sock.spill) > 0 ||
		n > st.sendWin || n > c.sendWin || n > int64(c.peerMaxFrame) {
		return false
	}
	c.sock.try = true
	err = st.writeLocked(*buf, true, codes.OK, "")
	c.sock.try = false
	if len(c.sock.spill) > 0 {
		go c.sendSpill()
	}
	if err != nil {
		return false // the connection failed: the handler's write fails too
	}
	st.replied.Store(true)
	return true
}

// CanTryReply reports whether ctx is a unary call's on a connection that
// TryReply can write to.
func CanTryReply(ctx context.Context) bool {
	cc, ok := ctx.(*callCtx)
	return ok && !cc.st.bidi && cc.st.c.sock != nil && cc.st.c.sock.raw != nil
}

// Replied reports whether TryReply wrote the response of the call whose
// handler context ctx is.
func Replied(ctx context.Context) bool {
	cc, ok := ctx.(*callCtx)
	return ok && cc.st.replied.Load()
}
