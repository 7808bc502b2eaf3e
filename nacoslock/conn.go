package nacoslock

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"nacos-lockd/protocol"
	"nacos-lockd/protocol/pb"
)

// conn is one Nacos connection to one server: a gRPC channel, the
// ServerCheck / bi-stream / ConnectionSetupRequest handshake, and the
// stream's reader, which answers the server's pushes. It never reconnects;
// the Client replaces a conn that ended.
type conn struct {
	server string // the main-port address from the server list
	cc     *grpc.ClientConn
	unary  pb.RequestClient
	stream grpc.BidiStreamingClient[pb.Payload, pb.Payload]
	id     string // the server's id for this connection, for logs
	cancel context.CancelFunc

	sendMu sync.Mutex // grpc forbids concurrent Send on one stream

	done     chan struct{} // closed when the stream ends or the conn is closed
	doneOnce sync.Once
	wg       sync.WaitGroup
}

// pushHandler is how a conn hands server pushes to its Client: it returns
// the reply to send on the stream (nil for none).
type pushHandler func(c *conn, m protocol.Message) protocol.Message

// dialConn connects to one server and completes the handshake within ctx.
func dialConn(ctx context.Context, server, grpcAddr string, o *options, onPush pushHandler) (*conn, error) {
	creds := insecure.NewCredentials()
	if o.tls != nil {
		creds = credentials.NewTLS(o.tls.Clone())
	}
	cc, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", grpcAddr, err)
	}
	c := &conn{server: server, cc: cc, unary: pb.NewRequestClient(cc), done: make(chan struct{})}
	if err := c.handshake(ctx, o, onPush); err != nil {
		c.close()
		return nil, fmt.Errorf("connect to %s: %w", grpcAddr, err)
	}
	return c, nil
}

func (c *conn) handshake(ctx context.Context, o *options, onPush pushHandler) error {
	resp, err := c.request(ctx, &protocol.ServerCheckRequest{}, nil)
	if err != nil {
		return fmt.Errorf("server check: %w", err)
	}
	sc, ok := resp.(*protocol.ServerCheckResponse)
	if !ok {
		return fmt.Errorf("server check answered with %s", resp.TypeName())
	}
	c.id = sc.ConnectionID
	// The stream lives as long as the connection, not as long as ctx.
	sctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	stream, err := pb.NewBiRequestStreamClient(c.cc).RequestBiStream(sctx)
	if err != nil {
		return fmt.Errorf("open stream: %w", err)
	}
	c.stream = stream
	tlsLabel := "false"
	if o.tls != nil {
		tlsLabel = "true"
	}
	setup := &protocol.ConnectionSetupRequest{
		ClientVersion: clientVersion,
		// The labels the Java lock client sends: the server names the
		// connection's application after AppName.
		Labels:       map[string]string{"source": "sdk", "module": "lock", "AppName": o.name, "tls.enable": tlsLabel},
		AbilityTable: map[string]bool{"lock": true},
		Tenant:       o.namespace,
	}
	if err := c.send(setup); err != nil {
		return fmt.Errorf("send setup: %w", err)
	}
	// The server registers the connection, then sends SetupAckRequest as
	// the stream's first message; unary lock calls before it would be
	// refused as unregistered.
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
		if !ack.AbilityTable["lock"] {
			acked <- errors.New("server does not support the lock feature")
			return
		}
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
	go c.readPushes(onPush)
	return nil
}

// readPushes answers every server push until the stream ends, then marks
// the conn done so that the Client moves to another server.
func (c *conn) readPushes(onPush pushHandler) {
	defer c.wg.Done()
	defer c.markDone()
	for {
		p, err := c.stream.Recv()
		if err != nil {
			return
		}
		m, err := protocol.Decode(p)
		if err != nil {
			continue // Java logs and sends nothing; so do we
		}
		if r := onPush(c, m); r != nil {
			if err := c.send(r); err != nil {
				return
			}
		}
	}
}

func (c *conn) send(m protocol.Message) error {
	p, err := protocol.Encode(m)
	if err != nil {
		return fmt.Errorf("encode %s: %w", m.TypeName(), err)
	}
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return c.stream.Send(p)
}

// request sends one unary request and decodes the answer. headers go in
// metadata.headers, where the server reads the access token.
func (c *conn) request(ctx context.Context, m protocol.Message, headers map[string]string) (protocol.Message, error) {
	p, err := protocol.EncodeWith(m, "", headers)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", m.TypeName(), err)
	}
	out, err := c.unary.Request(ctx, p)
	if err != nil {
		return nil, err
	}
	resp, err := protocol.Decode(out)
	if err != nil {
		return nil, fmt.Errorf("decode answer to %s: %w", m.TypeName(), err)
	}
	return resp, nil
}

func (c *conn) markDone() { c.doneOnce.Do(func() { close(c.done) }) }

// alive reports whether the stream is still up.
func (c *conn) alive() bool {
	select {
	case <-c.done:
		return false
	default:
		return true
	}
}

// close ends the stream and the channel and waits for the reader.
func (c *conn) close() {
	c.markDone()
	if c.cancel != nil {
		c.cancel()
	}
	_ = c.cc.Close()
	c.wg.Wait()
}
