// Package client is a Go client for nacos-lockd that speaks the Nacos 3.x
// gRPC protocol exactly as the Java SDK does: ServerCheck, then the
// bi-stream with ConnectionSetupRequest, waiting for SetupAckRequest, then
// unary LockOperationRequests, answering server pushes on the stream.
//
// Tests, the fault-injection harness and the load tool use it; it talks to
// the server over the network only.
package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"nacos-lockd/protocol"
	"nacos-lockd/protocol/pb"
)

// Client is one Nacos connection.
type Client struct {
	cc      *grpc.ClientConn
	unary   pb.RequestClient
	stream  grpc.BidiStreamingClient[pb.Payload, pb.Payload]
	connID  string
	ability map[string]bool
	opts    options

	pushes chan protocol.Message
	sendMu sync.Mutex // grpc forbids concurrent Send on one stream
	done   chan struct{}
	wg     sync.WaitGroup
	cancel context.CancelFunc
}

type options struct {
	version   string
	labels    map[string]string
	abilities map[string]bool
	clientIP  string
	headers   map[string]string
	autoReply bool
	noSetup   bool
	tls       *tls.Config
}

// Option configures Dial.
type Option func(*options)

// WithClientVersion sets ConnectionSetupRequest.clientVersion.
func WithClientVersion(v string) Option { return func(o *options) { o.version = v } }

// WithHeaders sets metadata.headers on every lock request.
func WithHeaders(h map[string]string) Option { return func(o *options) { o.headers = h } }

// WithoutAutoReply leaves server pushes unanswered (to test timeouts).
func WithoutAutoReply() Option { return func(o *options) { o.autoReply = false } }

// WithoutSetup stops after ServerCheck: the connection stays unregistered.
func WithoutSetup() Option { return func(o *options) { o.noSetup = true } }

// WithTLS connects with TLS (the server's nacos.remote.server.rpc.tls.*).
func WithTLS(cfg *tls.Config) Option { return func(o *options) { o.tls = cfg } }

// Dial connects to the SDK gRPC address (main port + 1000) and completes
// the handshake. The ctx bounds the handshake only.
func Dial(ctx context.Context, addr string, opt ...Option) (*Client, error) {
	o := options{
		version:   "Nacos-Java-Client:v3.3.0",
		labels:    map[string]string{"source": "sdk", "module": "lock", "AppName": "nacos-lockd-go", "tls.enable": "false"},
		abilities: map[string]bool{"fuzzyWatch": true, "lock": true, "mcp": true},
		clientIP:  "127.0.0.1",
		autoReply: true,
	}
	for _, f := range opt {
		f(&o)
	}
	creds := insecure.NewCredentials()
	if o.tls != nil {
		creds = credentials.NewTLS(o.tls)
	}
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	c := &Client{cc: cc, unary: pb.NewRequestClient(cc), opts: o, pushes: make(chan protocol.Message, 256), done: make(chan struct{})}
	if err := c.handshake(ctx); err != nil {
		cc.Close()
		return nil, err
	}
	return c, nil
}

func (c *Client) handshake(ctx context.Context) error {
	resp, err := c.Request(ctx, &protocol.ServerCheckRequest{})
	if err != nil {
		return fmt.Errorf("server check: %w", err)
	}
	sc, ok := resp.(*protocol.ServerCheckResponse)
	if !ok {
		return fmt.Errorf("server check answered with %s", resp.TypeName())
	}
	c.connID = sc.ConnectionID
	if c.opts.noSetup {
		return nil
	}
	sctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	stream, err := pb.NewBiRequestStreamClient(c.cc).RequestBiStream(sctx)
	if err != nil {
		return fmt.Errorf("open stream: %w", err)
	}
	c.stream = stream
	setup := &protocol.ConnectionSetupRequest{ClientVersion: c.opts.version, Labels: c.opts.labels, AbilityTable: c.opts.abilities}
	if err := c.send(setup, nil); err != nil {
		return fmt.Errorf("send setup: %w", err)
	}
	acked := make(chan error, 1)
	go func() {
		p, err := stream.Recv()
		if err != nil {
			acked <- fmt.Errorf("wait for setup ack: %w", err)
			return
		}
		m, err := protocol.Decode(p)
		if err != nil {
			acked <- fmt.Errorf("decode setup ack: %w", err)
			return
		}
		ack, ok := m.(*protocol.SetupAckRequest)
		if !ok {
			acked <- fmt.Errorf("first stream message is %s, not SetupAckRequest", m.TypeName())
			return
		}
		c.ability = ack.AbilityTable
		acked <- nil
	}()
	select {
	case err := <-acked:
		if err != nil {
			return err
		}
	case <-ctx.Done():
		return fmt.Errorf("wait for setup ack: %w", ctx.Err())
	}
	c.wg.Add(1)
	go c.readPushes()
	return nil
}

func (c *Client) send(m protocol.Message, headers map[string]string) error {
	p, err := protocol.EncodeWith(m, c.opts.clientIP, headers)
	if err != nil {
		return err
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return c.stream.Send(p)
}

func (c *Client) readPushes() {
	defer c.wg.Done()
	defer close(c.pushes)
	for {
		p, err := c.stream.Recv()
		if err != nil {
			return
		}
		m, err := protocol.Decode(p)
		if err != nil {
			continue
		}
		if c.opts.autoReply {
			if r := replyTo(m); r != nil {
				_ = c.send(r, nil)
			}
		}
		select {
		case c.pushes <- m:
		default: // nobody is reading; do not stall the stream
		}
	}
}

// replyTo builds the response the Java client sends to a push.
func replyTo(m protocol.Message) protocol.Message {
	ok := protocol.Success()
	ok.RequestID = protocol.RequestID(m)
	switch m.(type) {
	case *protocol.LockNotificationRequest:
		return &protocol.LockNotificationResponse{ResponseBase: ok}
	case *protocol.ConnectResetRequest:
		return &protocol.ConnectResetResponse{ResponseBase: ok}
	case *protocol.ClientDetectionRequest:
		return &protocol.ClientDetectionResponse{ResponseBase: ok}
	}
	return nil
}

// ConnectionID is the id the server gave this connection in ServerCheck.
func (c *Client) ConnectionID() string { return c.connID }

// Abilities is the server's ability table from SetupAckRequest.
func (c *Client) Abilities() map[string]bool { return c.ability }

// Pushes delivers every server push received after the setup ack. It is
// closed when the stream ends.
func (c *Client) Pushes() <-chan protocol.Message { return c.pushes }

// Request sends one unary request and decodes the answer.
func (c *Client) Request(ctx context.Context, m protocol.Message) (protocol.Message, error) {
	var headers map[string]string
	if _, ok := m.(*protocol.LockOperationRequest); ok {
		headers = c.opts.headers
	}
	p, err := protocol.EncodeWith(m, c.opts.clientIP, headers)
	if err != nil {
		return nil, err
	}
	return c.RequestRaw(ctx, p)
}

// RequestRaw sends a hand-built payload (to test malformed input).
func (c *Client) RequestRaw(ctx context.Context, p *pb.Payload) (protocol.Message, error) {
	out, err := c.unary.Request(ctx, p)
	if err != nil {
		return nil, err
	}
	return protocol.Decode(out)
}

// ErrUnexpectedReply is returned when a lock call is not answered with a
// LockOperationResponse.
var ErrUnexpectedReply = errors.New("unexpected reply type")

// Lock sends one LockOperationRequest.
func (c *Client) Lock(ctx context.Context, op protocol.LockOp, li protocol.LockInstance) (*protocol.LockOperationResponse, error) {
	m, err := c.Request(ctx, &protocol.LockOperationRequest{LockInstance: &li, LockOperationEnum: op})
	if err != nil {
		return nil, err
	}
	r, ok := m.(*protocol.LockOperationResponse)
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnexpectedReply, m.TypeName())
	}
	return r, nil
}

// Close ends the stream and the connection.
func (c *Client) Close() error {
	if c.cancel != nil {
		c.cancel()
	}
	err := c.cc.Close()
	c.wg.Wait()
	return err
}

// WaitPush waits for the next push of type T, skipping others.
func WaitPush[T protocol.Message](ctx context.Context, c *Client) (T, error) {
	var zero T
	for {
		select {
		case m, ok := <-c.pushes:
			if !ok {
				return zero, errors.New("stream closed")
			}
			if t, ok := m.(T); ok {
				return t, nil
			}
		case <-ctx.Done():
			return zero, ctx.Err()
		}
	}
}

// Instance builds a LockInstance; expiredTime and waitMs of nil are omitted.
func Instance(key, lockType, owner string, expiredTime, waitMs *int64) protocol.LockInstance {
	return protocol.LockInstance{Key: &key, LockType: &lockType, Owner: owner, ExpiredTime: expiredTime, WaitTimeMs: waitMs}
}

// Ms returns a pointer to v, for Instance.
func Ms(v int64) *int64 { return &v }

// Timeout is a convenience for short test deadlines.
func Timeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
