package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"nacos-lockd/connid"
	"nacos-lockd/control"
	"nacos-lockd/protocol"
	"nacos-lockd/protocol/pb"
	"nacos-lockd/statemachine"
	"nacos-lockd/statemachine/lockview"
	"nacos-lockd/transport/h2grpc"
)

// Table is everything the gateway asks of the replicated lock table
// (replica.Node; replicatest.Local in tests), including what it hands to
// its control loops (control.Table).
type Table interface {
	Propose(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error)
	// Record queues cmd in order behind everything proposed before it, to
	// be proposed by deadline, and returns at once (replica.Node.Record);
	// claims answered from a read are recorded with it.
	Record(deadline time.Time, cmd statemachine.Command) (<-chan error, error)
	// LockLinearizable reads one lock after everything committed before
	// the call has been applied.
	LockLinearizable(ctx context.Context, kind statemachine.Kind, key string) (lockview.Lock, error)
	// LockIfSoleVoter reads one lock from the local replica if that is
	// the shard's only voter, and so linearizable; false otherwise. It
	// never waits: Notify calls it.
	LockIfSoleVoter(kind statemachine.Kind, key string) (lockview.Lock, bool)
	// NextGrant names the waiter a RELEASE by owner would hand the lock
	// to, as the local replica sees it: a hint for pushing to it while the
	// release commits, never a rule.
	NextGrant(kind statemachine.Kind, key, owner string) statemachine.NextGrant
	IsLeader() bool
	// TransferLeadership hands leadership to another member before this
	// node shuts down, if it leads and another exists (nil otherwise).
	TransferLeadership(ctx context.Context) error
	// Expired, Nodes and Conns are the control loops' reads.
	Expired(nowMs int64, limit int) ([]statemachine.ExpiredLease, error)
	Nodes() ([]string, error)
	Conns(node string) ([]string, error)
}

var _ control.Table = Table(nil)

var errConnGone = errors.New("connection closed")

// Server is the Nacos SDK gRPC endpoint.
type Server struct {
	pb.UnimplementedRequestServer
	pb.UnimplementedBiRequestStreamServer

	cfg   Config
	log   zerolog.Logger
	m     *metrics
	reg   registry
	table Table
	ctl   *control.Loops // the leader's loops over table; set by Serve
	clock testClock      // time.Now, or the chaos suite's clock (testhooks builds)

	stopping atomic.Bool   // shutting down: closed connections are not cleaned up
	stop     chan struct{} // closed when shutdown begins
	bg       sync.WaitGroup
}

// New builds a server; Serve starts it.
func New(cfg Config, log zerolog.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Server{
		cfg:  cfg.withDefaults(),
		m:    newMetrics(cfg.Metrics),
		log:  log.With().Str("component", "gateway").Logger(),
		reg:  registry{conns: make(map[string]*conn), perIP: make(map[string]int)},
		stop: make(chan struct{}),
	}, nil
}

// now is the clock stamped into commands and read by the reaper and the
// node monitor.
func (s *Server) now() time.Time { return s.clock.now() }

// streamWorkers is the number of goroutines kept to serve calls: enough
// for one call in flight on each of a few hundred busy connections.
const streamWorkers = 256

// Transports (Config.Transport).
const (
	TransportH2   = "h2"   // transport/h2grpc, the default
	TransportGRPC = "grpc" // grpc-go's server
)

// rpcServer is what Serve and shutdown need of a gRPC server: grpc-go's
// *grpc.Server and transport/h2grpc's *Server both are one.
type rpcServer interface {
	Serve(net.Listener) error
	GracefulStop()
	Stop()
}

// Keepalive, the same on both transports: find dead peers (a client host
// that vanished without a FIN), and allow any sane client ping rate (the
// Java client pings every 6 minutes).
const (
	keepaliveTime    = 30 * time.Second
	keepaliveTimeout = 20 * time.Second
	minClientPing    = 10 * time.Second
)

// Serve answers clients on lis until ctx ends, then shuts down gracefully:
// every client is asked to reconnect elsewhere (ConnectResetRequest), the
// streams are closed and in-flight calls drained. It returns nil after a
// clean shutdown.
func (s *Server) Serve(ctx context.Context, lis net.Listener, table Table) error {
	s.table = table
	gs := s.newRPCServer()

	s.ctl = control.New(s.controlConfig(), table, s.log)
	s.ctl.Start()

	served := make(chan error, 1)
	go func() { served <- gs.Serve(trackedListener{lis, s}) }()
	s.log.Info().Str("addr", lis.Addr().String()).Str("transport", s.transport()).Msg("gateway listening")

	select {
	case err := <-served:
		s.beginStop()
		s.bg.Wait()
		s.ctl.Wait()
		return fmt.Errorf("serve grpc: %w", err)
	case <-ctx.Done():
	}
	s.shutdown(gs)
	<-served
	return nil
}

func (s *Server) transport() string {
	if s.cfg.Transport == "" {
		return TransportH2
	}
	return s.cfg.Transport
}

// newRPCServer builds the configured transport with both methods
// registered.
func (s *Server) newRPCServer() rpcServer {
	if s.transport() == TransportH2 {
		return h2grpc.NewServer(h2grpc.Config{
			TLS:              s.cfg.TLS,
			MaxRecvMsgSize:   s.cfg.MaxMessageSize,
			MaxSendMsgSize:   s.cfg.MaxMessageSize,
			KeepaliveTime:    keepaliveTime,
			KeepaliveTimeout: keepaliveTimeout,
			MinPingInterval:  minClientPing,
			MaxCallDuration:  s.cfg.RequestTimeout, // lock's bound, see there
			Workers:          streamWorkers,
			Log:              s.log.With().Str("transport", TransportH2).Logger(),
			ConnError:        s.m.connError,
		}, h2grpc.Handlers{Unary: s.Request, Stream: s.RequestBiStream})
	}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(s.cfg.MaxMessageSize),
		grpc.MaxSendMsgSize(s.cfg.MaxMessageSize),
		// Find dead peers (a client host that vanished without a FIN).
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: keepaliveTime, Timeout: keepaliveTimeout}),
		// The Java client pings every 6 minutes; allow anything sane.
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: minClientPing, PermitWithoutStream: true}),
		// Serve calls on long-lived worker goroutines: a fresh goroutine per
		// call starts with a small stack and grows it on every lock call
		// (JSON decoding and Propose are deep), which cost a tenth of the
		// server's CPU under load. Calls beyond the workers still get a
		// goroutine of their own.
		grpc.NumStreamWorkers(streamWorkers),
	}
	if s.cfg.TLS != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(s.cfg.TLS)))
	}
	gs := grpc.NewServer(opts...)
	pb.RegisterRequestServer(gs, s)
	pb.RegisterBiRequestStreamServer(gs, s)
	return gs
}

func (s *Server) beginStop() {
	if s.stopping.CompareAndSwap(false, true) {
		close(s.stop)
		if s.ctl != nil {
			s.ctl.Stop()
		}
	}
}

// shutdown follows Nacos's drain: reset every client so it moves to
// another server, then close the streams and stop.
func (s *Server) shutdown(gs rpcServer) {
	s.beginStop()
	deadline := time.Now().Add(s.cfg.ShutdownGrace)
	if s.table.IsLeader() {
		// Hand leadership over before the clients move, so they land on a
		// cluster that already has a leader.
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(s.cfg.ShutdownGrace/3))
		if err := s.table.TransferLeadership(ctx); err != nil {
			s.log.Warn().Err(err).Msg("leadership not transferred before shutdown")
		} else {
			s.log.Info().Msg("leadership transferred before shutdown")
		}
		cancel()
	}
	conns := s.reg.all()
	// A claim answered from a read may still wait for its record (it waits
	// out the coalesce window for company): record it before the client
	// moves, or it fails when the Raft node closes, and the client, which
	// was told it holds the lock, loses it. Recorded after the move, it
	// would bind the lock back to this connection.
	s.awaitRecords(conns, deadline)
	s.log.Info().Int("connections", len(conns)).Msg("shutting down: resetting clients")
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.resetClient(c, time.Until(deadline)/2)
		}()
	}
	wg.Wait()
	s.awaitMoves(conns, min(time.Until(deadline)/2, s.cfg.ResetDrain))
	for _, c := range s.reg.all() {
		c.release() // expected: no warning per client
	}
	stopped := make(chan struct{})
	go func() {
		gs.GracefulStop()
		close(stopped)
	}()
	t := time.NewTimer(max(time.Until(deadline), 100*time.Millisecond))
	defer t.Stop()
	select {
	case <-stopped:
	case <-t.C:
		s.log.Warn().Msg("graceful stop timed out; closing remaining calls")
		gs.Stop()
		<-stopped
	}
	// Claims answered after the first wait, up to the streams' end.
	s.awaitRecords(conns, deadline)
	s.bg.Wait()
	s.ctl.Wait()
	s.log.Info().Msg("gateway stopped")
}

// awaitRecords waits until the CLAIM of every claim answered from a read
// on conns has been committed or has failed, or until deadline.
func (s *Server) awaitRecords(conns []*conn, deadline time.Time) {
	t := time.NewTimer(max(time.Until(deadline), 0))
	defer t.Stop()
	for _, c := range conns {
		rec := c.pendingRecord()
		if rec == nil {
			continue
		}
		select {
		case <-rec:
			continue
		default:
		}
		select {
		case <-rec:
		case <-t.C:
			s.log.Warn().Msg("shutdown deadline passed with claims not yet recorded")
			return
		}
	}
}

// awaitMoves waits until the reset clients have closed their connections
// here, which they do once connected elsewhere, or until wait has passed.
// Ending the streams first races the client's own switch: the 3.0.0 Java
// client then sees the stream end before it has let go of it and switches a
// second time, dropping the connection it has just made elsewhere and with
// it any lock taken through that connection in the meantime.
func (s *Server) awaitMoves(conns []*conn, wait time.Duration) {
	t := time.NewTimer(max(wait, 0))
	defer t.Stop()
	for _, c := range conns {
		select {
		case <-c.done: // unregistered (it left), or dropped
		case <-t.C:
			return
		}
	}
}

// resetClient pushes ConnectResetRequest and waits briefly for the reply.
func (s *Server) resetClient(c *conn, wait time.Duration) {
	reply, err := c.push(func(id string) protocol.Message {
		r := &protocol.ConnectResetRequest{ServerIP: s.cfg.AdvertiseIP}
		r.RequestID = id
		if s.cfg.AdvertiseIP != "" && s.cfg.MainPort > 0 {
			r.ServerPort = fmt.Sprint(s.cfg.MainPort)
		}
		return r
	}, true)
	s.m.pushed("connect_reset", err)
	if err != nil {
		return
	}
	t := time.NewTimer(max(wait, 10*time.Millisecond))
	defer t.Stop()
	select {
	case <-reply:
	case <-t.C:
		c.log.Debug().Msg("no reply to ConnectResetRequest")
	}
}

func (s *Server) newConn(remote net.Addr) *conn {
	id := connid.New(s.now(), remote, s.cfg.NodeID).String()
	addr := ""
	if remote != nil {
		addr = remote.String()
	}
	return &conn{
		id:      id,
		remote:  addr,
		since:   s.now(),
		limiter: rate.NewLimiter(rate.Limit(s.cfg.RequestsPerSecond), max(1, int(s.cfg.RequestsPerSecond))),
		log:     s.log.With().Str("conn_id", id).Logger(),
		pending: make(map[string]chan protocol.Message),
		sendq:   make(chan outgoing, s.cfg.PushQueue),
		done:    make(chan struct{}),
	}
}

// Request answers unary calls.
func (s *Server) Request(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
	s.m.callStarted(callUnary)
	out, err := s.request(ctx, p)
	s.m.callHandled(callUnary, err)
	return out, err
}

func (s *Server) request(ctx context.Context, p *pb.Payload) (*pb.Payload, error) {
	c := connFrom(ctx)
	if c == nil {
		return nil, errors.New("gateway: call without a tracked connection")
	}
	m := s.handle(ctx, c, p)
	if h2grpc.Replied(ctx) {
		return nil, nil // answered at apply (answerAtApply): the transport drops this
	}
	return encodeReply(c, m)
}

func encodeReply(c *conn, m protocol.Message) (*pb.Payload, error) {
	out, err := protocol.Encode(m)
	if err != nil {
		c.log.Error().Err(err).Str("type", m.TypeName()).Msg("encode reply")
		return nil, fmt.Errorf("encode %s: %w", m.TypeName(), err)
	}
	return out, nil
}

func (s *Server) handle(ctx context.Context, c *conn, p *pb.Payload) protocol.Message {
	msg, err := protocol.Decode(p)
	if err != nil {
		return s.undecodable(c, err)
	}
	switch req := msg.(type) {
	case *protocol.ServerCheckRequest:
		// Answered before registration: it is the first call on a channel.
		r := &protocol.ServerCheckResponse{ConnectionID: c.id, SupportAbilityNegotiation: true}
		r.ResponseBase = protocol.Success()
		return r
	case *protocol.HealthCheckRequest:
		if !c.isRegistered() {
			return errorResponse(protocol.CodeUnregister, msgUnregistered)
		}
		return &protocol.HealthCheckResponse{ResponseBase: protocol.Success()}
	case *protocol.LockOperationRequest:
		if !c.isRegistered() {
			return errorResponse(protocol.CodeUnregister, msgUnregistered)
		}
		return s.lock(ctx, c, p, req)
	}
	c.log.Debug().Str("type", msg.TypeName()).Msg("no handler for unary type")
	return errorResponse(protocol.CodeNoHandler, "No handler for request type "+quoteType(msg.TypeName()))
}

// undecodable answers a request that did not decode. (Apart from handle,
// so that errors.As's targets, which escape, cost nothing per good call.)
func (s *Server) undecodable(c *conn, err error) protocol.Message {
	var unknown *protocol.UnknownTypeError
	var bodyErr *protocol.BodyError
	switch {
	case errors.As(err, &unknown):
		c.log.Debug().Str("type", unknown.Type).Msg("request of unknown type")
		return errorResponse(protocol.CodeNoHandler, "No handler for request type "+quoteType(unknown.Type))
	case errors.As(err, &bodyErr) && bodyErr.Type == "LockOperationRequest":
		// A lock client must always get its own response type: an
		// ErrorResponse would make it retry the request four times.
		if !c.isRegistered() {
			return errorResponse(protocol.CodeUnregister, msgUnregistered)
		}
		c.log.Debug().Err(bodyErr.Err).Msg("unparseable lock request")
		return lockFailure("Invalid LockOperationRequest body: " + bodyErr.Err.Error())
	}
	c.log.Debug().Err(err).Msg("unparseable request")
	return errorResponse(protocol.CodeBadGateway, "Request body could not be parsed: "+err.Error())
}

const msgUnregistered = "Connection is unregistered."

// quoteType keeps a hostile type name from flooding a reply.
func quoteType(t string) string {
	if len(t) > 128 {
		t = t[:128] + "..."
	}
	return fmt.Sprintf("%q", t)
}

func errorResponse(code int, msg string) *protocol.ErrorResponse {
	return &protocol.ErrorResponse{ResponseBase: protocol.Failure(protocol.CodeFailure, code, msg)}
}

// RequestBiStream carries the connection setup and, afterwards, server
// pushes and the client's replies to them.
func (s *Server) RequestBiStream(stream grpc.BidiStreamingServer[pb.Payload, pb.Payload]) error {
	s.m.callStarted(callStream)
	err := s.requestBiStream(stream)
	s.m.callHandled(callStream, err)
	return err
}

func (s *Server) requestBiStream(stream grpc.BidiStreamingServer[pb.Payload, pb.Payload]) error {
	ctx := stream.Context()
	c := connFrom(ctx)
	if c == nil {
		return errors.New("gateway: stream without a tracked connection")
	}
	first, err := recvWithin(stream, s.cfg.SetupTimeout)
	if err != nil {
		c.log.Debug().Err(err).Msg("no connection setup on the stream")
		return status.Error(codes.DeadlineExceeded, "expected ConnectionSetupRequest")
	}
	msg, err := protocol.Decode(first)
	setup, ok := msg.(*protocol.ConnectionSetupRequest)
	if err != nil || !ok {
		c.log.Debug().Err(err).Msg("stream did not start with ConnectionSetupRequest")
		return errors.New("expected ConnectionSetupRequest")
	}
	if !s.register(c, first, setup) {
		return status.Error(codes.ResourceExhausted, "connection refused: server connection limit reached")
	}
	defer s.unregister(c, "stream closed")

	// The ack goes out before anything else on the stream: the client
	// treats any other first message as a failed negotiation.
	ack := &protocol.SetupAckRequest{AbilityTable: map[string]bool{"lock": true}}
	p, err := protocol.Encode(ack)
	if err != nil {
		return fmt.Errorf("encode setup ack: %w", err)
	}
	if err := stream.Send(p); err != nil {
		return nil
	}

	// One reader goroutine; this goroutine is the only writer.
	readErr := make(chan error, 1)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		readErr <- s.readReplies(c, stream)
	}()
	for {
		c.writerIdle.Store(true)
		select {
		case o := <-c.sendq:
			if err := stream.Send(c.take(o)); err != nil {
				return nil
			}
		case <-readErr:
			return nil
		case <-c.done:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

func (s *Server) readReplies(c *conn, stream grpc.BidiStreamingServer[pb.Payload, pb.Payload]) error {
	for {
		p, err := stream.Recv()
		if err != nil {
			return err
		}
		msg, err := protocol.Decode(p)
		if err != nil {
			c.log.Debug().Err(err).Msg("unparseable message on stream")
			continue
		}
		if protocol.IsRequest(msg) {
			c.log.Debug().Str("type", msg.TypeName()).Msg("unexpected request on stream")
			continue
		}
		if base, _ := protocol.ResponseOf(msg); !base.OK() {
			c.log.Debug().Str("type", msg.TypeName()).Int("code", base.ErrorCode).Str("message", base.Message).Msg("client failed a push")
		}
		c.reply(msg)
	}
}

// register records the connection when its setup request arrives, before
// the ack: the client starts unary calls as soon as it sees the ack.
func (s *Server) register(c *conn, p *pb.Payload, setup *protocol.ConnectionSetupRequest) bool {
	if s.stopping.Load() {
		return false
	}
	c.mu.Lock()
	if c.registered || c.ended {
		c.mu.Unlock()
		return false
	}
	c.registered = true
	c.clientIP = p.GetMetadata().GetClientIp()
	c.version = setup.ClientVersion
	c.app = setup.Labels["AppName"]
	c.mu.Unlock()
	if limit := s.reg.admit(c, s.cfg.MaxConnections, s.cfg.MaxConnectionsPerIP); limit != "" {
		c.mu.Lock()
		c.registered = false
		c.mu.Unlock()
		s.m.limited(limit)
		c.log.Warn().Str("limit", limit).Str("remote", c.remote).Msg("connection refused by a limit")
		return false
	}
	s.m.connOpen()
	c.log.Info().Str("remote", c.remote).Str("client_ip", c.clientIP).Str("version", c.version).
		Str("app", setup.Labels["AppName"]).Msg("connection registered")
	return true
}

// unregister forgets a connection for good and, unless the server itself
// is going down, releases what it held through a replicated cleanup.
func (s *Server) unregister(c *conn, why string) {
	c.mu.Lock()
	if c.ended {
		c.mu.Unlock()
		return
	}
	c.ended = true
	wasRegistered := c.registered
	for id, ch := range c.pending {
		close(ch)
		delete(c.pending, id)
	}
	c.mu.Unlock()
	c.release()
	if !wasRegistered {
		return
	}
	s.reg.remove(c)
	s.m.connClose()
	c.log.Info().Str("reason", why).Msg("connection closed")
	if s.stopping.Load() {
		// A restart is not a client leaving: its locks stay until their
		// leases end or their owners come back and release them.
		return
	}
	if s.ctl != nil {
		s.ctl.ScheduleCleanup(c.id)
	}
}

// Notify delivers the grants made by an applied batch to the waiters this
// node holds connections for, and answers the claims that wait for them
// where it can (answerAtApply). It never blocks (see conn.push).
func (s *Server) Notify(notes []statemachine.Notification) {
	for _, n := range notes {
		c := s.reg.get(n.ConnID)
		if c == nil {
			continue // held by another node, or gone
		}
		// Remember the grant before anyone can claim it: a claim sent on a
		// push ahead may be waiting for exactly this.
		c.expectClaim(n)
		announced, claim := c.granted(claimKey{n.Kind, n.Key, n.Owner})
		if claim != nil {
			claim.answer()
			close(claim.done)
		}
		if !announced {
			_, err := c.push(availableNotification(n.Kind, n.Key, n.Owner), false)
			s.m.pushed("lock_notification", err)
			if err != nil {
				c.log.Debug().Err(err).Msg("lock notification not delivered")
				continue
			}
		}
		s.m.grantPushed(n)
	}
}

// availableNotification builds the LockNotificationRequest(AVAILABLE)
// pushed to owner, a waiter for the lock.
func availableNotification(kind statemachine.Kind, key, owner string) func(requestID string) protocol.Message {
	return func(id string) protocol.Message {
		r := &protocol.LockNotificationRequest{
			LockKey: key, LockType: kind.String(), Owner: owner,
			NotificationType: protocol.NotificationAvailable,
		}
		r.RequestID = id
		return r
	}
}

// pushAhead pushes AVAILABLE to the waiter that a release by cmd's owner
// will hand the lock to, as the local replica sees it, before the release
// is proposed: the push, the waiter's wake-up and its claim travel while
// the release commits, instead of after it (gateway/DESIGN.md, "Pushed
// ahead of the commit"), and the stream's writer takes it before the
// release goes on to propose (conn.pushFirst). The caller calls the
// returned function once the release has returned. Nothing is pushed when
// no hand-off is due, or the waiter is connected to another node.
func (s *Server) pushAhead(cmd statemachine.Command) func() {
	next := s.table.NextGrant(cmd.Kind, cmd.Key, cmd.Owner)
	if !next.Found {
		return nil
	}
	c := s.reg.get(next.ConnID)
	if c == nil {
		return nil
	}
	k := claimKey{cmd.Kind, cmd.Key, next.Owner}
	a := c.sentAhead(k)
	if err := c.pushFirst(availableNotification(cmd.Kind, cmd.Key, next.Owner)); err != nil {
		c.releaseDone(k, a)
		s.m.pushed("lock_notification_ahead", err)
		return nil
	}
	s.m.pushed("lock_notification_ahead", nil)
	return func() {
		if c.releaseDone(k, a) {
			// The release granted someone else, or nobody: the waiter's
			// claim finds no grant and it waits for the next push.
			s.m.pushAheadMissed()
		}
	}
}

// recvWithin reads the first stream message, giving up after d: a stream
// that never says who it is must not hold a goroutine forever. (On
// timeout the handler returns, which ends the stream and unblocks Recv.)
func recvWithin(stream grpc.BidiStreamingServer[pb.Payload, pb.Payload], d time.Duration) (*pb.Payload, error) {
	type result struct {
		p   *pb.Payload
		err error
	}
	ch := make(chan result, 1)
	go func() {
		p, err := stream.Recv()
		ch <- result{p, err}
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case r := <-ch:
		return r.p, r.err
	case <-t.C:
		return nil, errors.New("timed out waiting for ConnectionSetupRequest")
	}
}
