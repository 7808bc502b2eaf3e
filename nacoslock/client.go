package nacoslock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"nacos-lockd/protocol"
)

// grpcOffset is Nacos's fixed distance from the main port to the SDK
// port.
const grpcOffset = 1000

// Timings of the connection, the Java lock client's (docs/wire-protocol.md
// §4.2, §4.4, §4.6).
const (
	serverCheckTimeout = 3 * time.Second
	setupAckTimeout    = 5 * time.Second
	healthInterval     = 5 * time.Second
	healthTimeout      = 3 * time.Second
)

// ErrClosed is returned by every call on a closed Client.
var ErrClosed = errors.New("nacoslock: client closed")

// Client is a session with a nacos-lockd (or Nacos 3.3) cluster: one
// connection at a time to one of the servers, replaced by a connection to
// another when it fails or the server asks the client to move
// (ConnectResetRequest). Locks survive the move as long as the new
// connection renews them within the server's grace (the disconnect grace
// for a server that closed the connection, the node grace for a node that
// died): a Mutex renews at once after every reconnect. A Client is safe
// for concurrent use.
type Client struct {
	o       options
	servers []string // main-port host:port, as serverAddr lists them
	id      string   // prefix of every owner this client sends
	auth    *authenticator

	mu      sync.Mutex
	cur     *conn
	ready   chan struct{} // closed while cur is set
	moved   chan struct{} // closed and replaced each time a new conn is installed
	next    int           // index of the server to try next
	prefer  string        // server a ConnectResetRequest pointed to
	waits   map[pushKey]chan struct{}
	holds   map[*hold]struct{}
	closed  bool
	reset   chan struct{} // a ConnectResetRequest asks the session to move
	quit    chan struct{}
	wg      sync.WaitGroup
	mutexes atomic.Uint64
}

// pushKey names a queued Lock call the way a LockNotificationRequest
// does: lock type, key and the waiter's owner.
type pushKey struct{ typ, key, owner string }

// Dial connects to one of servers (main-port addresses, host:port, as in
// a Nacos serverAddr; the SDK port is the main port + 1000), trying each
// in turn, and returns once a connection is up. With WithAuth it logs in
// first. ctx bounds Dial only; the session then runs until Close.
func Dial(ctx context.Context, servers []string, opts ...Option) (*Client, error) {
	if len(servers) == 0 {
		return nil, errors.New("nacoslock: no servers")
	}
	for _, s := range servers {
		if _, _, err := splitServer(s); err != nil {
			return nil, err
		}
	}
	o := defaultOptions()
	for _, f := range opts {
		f(&o)
	}
	cl := &Client{
		o: o, servers: append([]string(nil), servers...), id: randomID(),
		ready: make(chan struct{}), moved: make(chan struct{}),
		waits: map[pushKey]chan struct{}{}, holds: map[*hold]struct{}{},
		reset: make(chan struct{}, 1), quit: make(chan struct{}),
	}
	if o.username != "" {
		cl.auth = newAuthenticator(&cl.o, cl.servers)
		if err := cl.auth.login(ctx); err != nil {
			return nil, err
		}
	}
	var errs []error
	for range cl.servers {
		c, err := cl.connect(ctx, cl.pick())
		if err == nil {
			cl.install(c)
			cl.wg.Add(1)
			go cl.session(c)
			return cl, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("nacoslock: no server reachable: %w", errors.Join(errs...))
}

// splitServer checks a server address and returns its SDK gRPC address.
func splitServer(s string) (string, string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return "", "", fmt.Errorf("nacoslock: server %q: want host:port (the main port): %w", s, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p <= 0 || p+grpcOffset > 65535 {
		return "", "", fmt.Errorf("nacoslock: server %q: bad port", s)
	}
	return host, net.JoinHostPort(host, strconv.Itoa(p+grpcOffset)), nil
}

func randomID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// pick returns the server to try next: the one a ConnectResetRequest
// named, else the next in the list.
func (cl *Client) pick() string {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if s := cl.prefer; s != "" {
		cl.prefer = ""
		return s
	}
	s := cl.servers[cl.next%len(cl.servers)]
	cl.next++
	return s
}

func (cl *Client) connect(ctx context.Context, server string) (*conn, error) {
	_, grpcAddr, _ := splitServer(server)
	ctx, cancel := context.WithTimeout(ctx, serverCheckTimeout+setupAckTimeout)
	defer cancel()
	c, err := dialConn(ctx, server, grpcAddr, &cl.o, cl.onPush)
	if err != nil {
		cl.o.log.Debug("connection attempt failed", "server", server, "err", err)
		return nil, err
	}
	cl.o.log.Info("connected", "server", server, "connection_id", c.id)
	return c, nil
}

// install makes c the current connection and tells every held lock and
// every queued Lock call: holds renew at once (binding the lock to the new
// connection before the server's grace ends), waiters send their ACQUIRE
// again (a push meant for the old connection may be lost).
func (cl *Client) install(c *conn) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cl.cur = c
	close(cl.ready)
	close(cl.moved)
	cl.moved = make(chan struct{})
	for _, ch := range cl.waits {
		signal(ch)
	}
	for h := range cl.holds {
		signal(h.kick)
	}
}

// uninstall forgets the current connection; calls wait for the next.
func (cl *Client) uninstall(c *conn) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.cur == c {
		cl.cur = nil
		cl.ready = make(chan struct{})
	}
}

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// session keeps one connection up until Close: it health-checks the
// current one, and when it ends (stream closed, health check failed) or
// the server asks the client to move, it connects to the next server. On
// a move the new connection is made before the old one is closed, as the
// Java client does, so that the draining server's clients are never
// without one.
func (cl *Client) session(c *conn) {
	defer cl.wg.Done()
	for {
		hcDone := make(chan struct{})
		go cl.healthLoop(c, hcDone)
		moving := false
		select {
		case <-c.done:
			cl.o.log.Warn("connection lost", "server", c.server)
		case <-cl.reset:
			moving = true
			cl.o.log.Info("server asked the client to move", "server", c.server)
		case <-cl.quit:
			cl.uninstall(c)
			c.close()
			<-hcDone
			return
		}
		if !moving {
			cl.uninstall(c)
			c.close()
		}
		nc := cl.reconnect(c.server)
		if moving {
			cl.uninstall(c)
			c.close()
		}
		<-hcDone
		if nc == nil {
			return // closed
		}
		cl.install(nc)
		c = nc
	}
}

// reconnect tries the servers round robin until one answers, starting
// with another than the one just left, sleeping between attempts as the
// Java client does (100 ms in the first pass over the list, 200 ms in the
// second, up to 5 s). It returns nil once the Client is closed.
func (cl *Client) reconnect(left string) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-cl.quit:
			cancel()
		case <-ctx.Done():
		}
	}()
	for attempt := 0; ; attempt++ {
		s := cl.pick()
		if s == left && len(cl.servers) > 1 && attempt == 0 {
			s = cl.pick()
		}
		if c, err := cl.connect(ctx, s); err == nil {
			return c
		}
		turn := attempt / len(cl.servers)
		t := time.NewTimer(time.Duration(min(turn+1, 50)) * 100 * time.Millisecond)
		select {
		case <-t.C:
		case <-cl.quit:
			t.Stop()
			return nil
		}
	}
}

// healthLoop sends HealthCheckRequest every 5 s and marks c done when one
// fails: a server that stopped answering (paused, partitioned) keeps the
// TCP connection open, so only an application-level check finds it. It
// also refreshes the access token when it is due.
func (cl *Client) healthLoop(c *conn, done chan struct{}) {
	defer close(done)
	t := time.NewTimer(healthInterval)
	defer t.Stop()
	fails := 0
	for {
		select {
		case <-c.done:
			return
		case <-cl.quit:
			return
		case <-t.C:
		}
		if cl.auth != nil && cl.auth.due(time.Now()) {
			cl.relogin()
		}
		ctx, cancel := context.WithTimeout(context.Background(), healthTimeout)
		resp, err := c.request(ctx, &protocol.HealthCheckRequest{}, nil)
		cancel()
		if base, ok := protocol.ResponseOf(resp); err == nil && ok && base.OK() {
			fails = 0
			t.Reset(healthInterval)
			continue
		}
		// Java retries a health check that got no answer; one more try
		// at once keeps a single slow answer from costing the connection
		// without waiting another interval to find a dead one.
		if fails++; fails >= 2 || err == nil {
			cl.o.log.Warn("health check failed", "server", c.server, "err", err)
			c.markDone()
			return
		}
		t.Reset(time.Millisecond)
	}
}

func (cl *Client) relogin() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.auth.login(ctx); err != nil {
		cl.o.log.Warn("token refresh failed", "err", err)
		return
	}
	cl.o.log.Debug("token refreshed")
}

// onPush answers the server's pushes on the stream: lock notifications
// wake the queued Lock call they name; a reset makes the session move;
// a detection is a liveness probe.
func (cl *Client) onPush(c *conn, m protocol.Message) protocol.Message {
	ok := protocol.Success()
	ok.RequestID = protocol.RequestID(m)
	switch m := m.(type) {
	case *protocol.LockNotificationRequest:
		cl.mu.Lock()
		ch := cl.waits[pushKey{m.LockType, m.LockKey, m.Owner}]
		cl.mu.Unlock()
		if ch != nil {
			signal(ch)
		}
		return &protocol.LockNotificationResponse{ResponseBase: ok}
	case *protocol.ConnectResetRequest:
		cl.mu.Lock()
		current := cl.cur == c
		cl.mu.Unlock()
		if current {
			// A reset from a connection already left behind asks for
			// nothing: the session has moved.
			cl.preferServer(m.ServerIP)
			signal(cl.reset)
		}
		return &protocol.ConnectResetResponse{ResponseBase: ok}
	case *protocol.ClientDetectionRequest:
		return &protocol.ClientDetectionResponse{ResponseBase: ok}
	}
	return nil
}

// preferServer remembers the server a ConnectResetRequest named, but
// only one of our own list (as Java: its port from the list).
func (cl *Client) preferServer(ip string) {
	if ip == "" {
		return
	}
	cl.mu.Lock()
	defer cl.mu.Unlock()
	cur := ""
	if cl.cur != nil {
		cur = cl.cur.server
	}
	for _, s := range cl.servers {
		if h, _, _ := net.SplitHostPort(s); h == ip && s != cur {
			cl.prefer = s
			return
		}
	}
}

// Close ends the session: every held Mutex reports Lost with ErrClosed,
// and the connection is closed, which makes the server release what it
// held after its disconnect grace. Close does not send RELEASE; Unlock
// first for an immediate hand-off.
func (cl *Client) Close() error {
	cl.mu.Lock()
	if cl.closed {
		cl.mu.Unlock()
		return nil
	}
	cl.closed = true
	holds := make([]*hold, 0, len(cl.holds))
	for h := range cl.holds {
		holds = append(holds, h)
	}
	cl.mu.Unlock()
	for _, h := range holds {
		h.end(ErrClosed)
	}
	close(cl.quit)
	cl.wg.Wait()
	if cl.auth != nil {
		cl.auth.http.CloseIdleConnections()
	}
	return nil
}

// current waits for a connection.
func (cl *Client) current(ctx context.Context) (*conn, error) {
	for {
		cl.mu.Lock()
		c, ready, closed := cl.cur, cl.ready, cl.closed
		cl.mu.Unlock()
		if closed {
			return nil, ErrClosed
		}
		if c != nil && c.alive() {
			return c, nil
		}
		select {
		case <-ready:
		case <-cl.quit:
			return nil, ErrClosed
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for a connection: %w", ctx.Err())
		}
		if c != nil && !c.alive() {
			// ready is still closed for a conn whose stream just ended:
			// yield until the session uninstalls it.
			t := time.NewTimer(10 * time.Millisecond)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return nil, fmt.Errorf("wait for a connection: %w", ctx.Err())
			}
		}
	}
}

// movedCh is closed at the next reconnect.
func (cl *Client) movedCh() <-chan struct{} {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.moved
}

// outcome says what a failed lock call tells about the server's state.
type outcome int

const (
	applied   outcome = iota // the server answered; the answer is the state
	notSent                  // nothing changed on the server: safe to repeat
	uncertain                // it may or may not have been applied
)

// lockCall sends one LockOperationRequest on the current connection. A
// returned error comes with the outcome: whether the server may have
// applied the request. It retries what is safe to retry: a connection
// the server no longer knows (301), and a token the server no longer
// accepts (after logging in again).
func (cl *Client) lockCall(ctx context.Context, op protocol.LockOp, li protocol.LockInstance) (*protocol.LockOperationResponse, outcome, error) {
	relogged := false
	for attempt := 0; ; attempt++ {
		c, err := cl.current(ctx)
		if err != nil {
			return nil, notSent, err
		}
		var headers map[string]string
		if cl.auth != nil {
			headers = map[string]string{"accessToken": cl.auth.current()}
		} else if cl.o.token != "" {
			headers = map[string]string{"accessToken": cl.o.token}
		}
		actx, cancel := context.WithTimeout(ctx, cl.o.requestTimeout)
		m, err := c.request(actx, &protocol.LockOperationRequest{LockInstance: &li, LockOperationEnum: op}, headers)
		cancel()
		if err != nil {
			switch {
			case status.Code(err) == codes.Unavailable:
				c.markDone() // the transport is gone: move on at once
			case ctx.Err() == nil && (status.Code(err) == codes.DeadlineExceeded || errors.Is(err, context.DeadlineExceeded)):
				// The server answers every lock call within its own
				// request timeout (2.5 s), below ours: one that does not
				// answer at all is stopped or cut off.
				c.markDone()
			}
			return nil, uncertain, fmt.Errorf("%s: %w", opName(op), err)
		}
		switch r := m.(type) {
		case *protocol.LockOperationResponse:
			if r.OK() {
				return r, applied, nil
			}
			serr := &ServerError{Op: opName(op), ErrorCode: r.ErrorCode, Message: r.Message}
			if r.ErrorCode == protocol.CodeNoRight && cl.auth != nil && !relogged && strings.Contains(r.Message, "token") {
				relogged = true
				cl.relogin()
				continue
			}
			if serr.writeFailure() {
				// Not committed within the server's request timeout: it
				// may still commit.
				return nil, uncertain, serr
			}
			return nil, notSent, serr
		case *protocol.ErrorResponse:
			if r.ErrorCode == protocol.CodeUnregister && attempt < 3 {
				// The server lost our registration (it restarted, or
				// the stream just ended): reconnect and send again.
				c.markDone()
				continue
			}
			return nil, notSent, &ServerError{Op: opName(op), ErrorCode: r.ErrorCode, Message: r.Message}
		default:
			return nil, notSent, fmt.Errorf("%s: unexpected answer %s", opName(op), m.TypeName())
		}
	}
}

func opName(op protocol.LockOp) string { return strings.ToLower(string(op)) }

// ErrForbidden matches (errors.Is) a ServerError the server sent because
// the token is missing or invalid, or the user may not use the key.
var ErrForbidden = errors.New("nacoslock: forbidden")

// ServerError is a lock request the server answered with a failure
// (resultCode 500): an invalid request, a refusal by auth (ErrorCode 403,
// matches ErrForbidden) or a limit (503), or a write the server could not
// commit in time.
type ServerError struct {
	Op        string // acquire, release, renew, cancel_wait
	ErrorCode int    // Nacos errorCode: 0, 403, 503, ...
	Message   string
}

func (e *ServerError) Error() string {
	return fmt.Sprintf("nacoslock: %s: server error %d: %s", e.Op, e.ErrorCode, e.Message)
}

// Is makes errors.Is(err, ErrForbidden) true for auth refusals.
func (e *ServerError) Is(target error) bool {
	return target == ErrForbidden && e.ErrorCode == protocol.CodeNoRight
}

// writeFailure: the texts the server answers when a write was not
// committed within its request timeout (gateway/lock.go writeFailure).
func (e *ServerError) writeFailure() bool {
	if e.ErrorCode != 0 {
		return false
	}
	switch e.Message {
	case "tryLock error.", "unLock error.", "renew error.", "cancel wait error.", "lock operation error.":
		return true
	}
	return false
}
