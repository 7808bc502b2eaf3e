package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"nacos-lockd/gateway/auth"
)

// Config configures the gateway. Zero values pick the defaults noted,
// which are Nacos's where Nacos has one.
type Config struct {
	// ListenAddr is the SDK gRPC address, host:port (main port + 1000).
	ListenAddr string
	// AdvertiseIP and MainPort are what ConnectResetRequest tells clients;
	// an empty IP lets the client pick the next server from its own list.
	AdvertiseIP string
	MainPort    int
	// NodeID makes connection ids unique across a cluster.
	NodeID string

	DefaultLease    time.Duration // nacos.lock.default_expire_time, 30s
	MaxLease        time.Duration // nacos.lock.max_expire_time, 30m
	MaxWait         time.Duration // nacos.lock.max_wait_time, 30m
	ScanInterval    time.Duration // nacos.lock.expire.scan.interval, 1s
	DisconnectGrace time.Duration // nacos.lock.disconnect_grace_ms, 0
	RequestTimeout  time.Duration // nacos.lock.request_timeout, 2.5s
	MaxKeyLength    int           // nacos.lock.max_key_length, 4096 bytes
	MaxOwnerLength  int           // nacos.lock.max_owner_length, 1024 bytes
	MaxParamsBytes  int           // nacos.lock.max_params_bytes, 4096 bytes of params JSON
	// Table limits, stamped into every ACQUIRE so all replicas enforce the
	// same: lock entries in total (a memory guard) and waiters per lock.
	MaxLocks          uint64 // nacos.lock.max_locks, 2000000
	MaxWaitersPerLock uint32 // nacos.lock.max_waiters_per_lock, 10000

	// Connection and rate limits: exceeding one never affects other clients.
	MaxConnections      int     // nacos.lock.max_connections, 10000 registered connections
	MaxConnectionsPerIP int     // nacos.lock.max_connections_per_ip, 256 per peer IP
	RequestsPerSecond   float64 // nacos.lock.max_requests_per_second, 2000 lock requests/s per connection

	// TLS, when set, makes the SDK port serve TLS only (with client
	// certificates checked if the config asks for them).
	TLS *tls.Config

	// MaxMessageSize bounds one gRPC message; the Java client's own limit
	// is 10 MiB, so larger would never be answered anyway. Default 10 MiB.
	MaxMessageSize int
	// PushQueue is how many pushes may wait for one connection's stream
	// before the connection is dropped (a client that does not read must
	// not hold up apply). Default 1024.
	PushQueue int
	// PushTimeout bounds the wait for a push's reply. Default 3s, as Nacos.
	PushTimeout time.Duration
	// ShutdownGrace bounds graceful shutdown: resets, then draining. Default 5s.
	ShutdownGrace time.Duration
	// ResetDrain bounds how long shutdown waits, after resetting, for the
	// clients to leave for another server (they close their connection here
	// once connected there, within tens of milliseconds). A client whose only
	// server is this one never leaves, hence a short bound. Default 1s, and
	// never more than half of what is left of ShutdownGrace.
	ResetDrain time.Duration
	// SetupTimeout bounds how long a new stream may take to send its
	// ConnectionSetupRequest (the Java client sends it at once). Default 10s.
	SetupTimeout time.Duration

	// PeerAlive reports whether another node (by the node id its
	// connection ids end with) answers now; nil in a single-node setup.
	// It must return false for a node that is no longer a member.
	PeerAlive func(ctx context.Context, node string) bool
	// NodeGrace is how long a node may be unreachable before the leader
	// releases the locks its clients held (nacos.lock.node_grace_ms, 15s).
	NodeGrace time.Duration
	// NodeCheckInterval is how often the leader checks the other nodes. 1s.
	NodeCheckInterval time.Duration

	// Metrics is where the gateway registers its series; nil records none.
	Metrics prometheus.Registerer
	// Auth, when set, requires a valid accessToken with write permission on
	// the key for every lock request (nacos.core.auth.enabled).
	Auth *auth.Authenticator
}

func (c Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.DefaultLease, 30*time.Second)
	def(&c.MaxLease, 30*time.Minute)
	def(&c.MaxWait, 30*time.Minute)
	def(&c.ScanInterval, time.Second)
	// Below the 3.0-line client's 3 s request timeout: the client should
	// get our answer rather than give up and resend the request.
	def(&c.RequestTimeout, 2500*time.Millisecond)
	def(&c.PushTimeout, 3*time.Second)
	def(&c.ShutdownGrace, 5*time.Second)
	def(&c.ResetDrain, time.Second)
	def(&c.SetupTimeout, 10*time.Second)
	def(&c.NodeGrace, 15*time.Second)
	def(&c.NodeCheckInterval, time.Second)
	if c.MaxKeyLength == 0 {
		c.MaxKeyLength = 4096
	}
	if c.MaxOwnerLength == 0 {
		c.MaxOwnerLength = 1024
	}
	if c.MaxLocks == 0 {
		c.MaxLocks = 2_000_000
	}
	if c.MaxWaitersPerLock == 0 {
		c.MaxWaitersPerLock = 10_000
	}
	if c.MaxParamsBytes == 0 {
		c.MaxParamsBytes = 4096
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = 10000
	}
	if c.MaxConnectionsPerIP == 0 {
		c.MaxConnectionsPerIP = 256
	}
	if c.RequestsPerSecond == 0 {
		c.RequestsPerSecond = 2000
	}
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = 10 << 20
	}
	if c.PushQueue == 0 {
		c.PushQueue = 1024
	}
	return c
}

// Validate reports settings that cannot work.
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.ListenAddr == "" {
		errs = append(errs, errors.New("gateway: listen address is required"))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"default lease", c.DefaultLease}, {"max lease", c.MaxLease}, {"max wait", c.MaxWait},
		{"scan interval", c.ScanInterval}, {"request timeout", c.RequestTimeout},
	} {
		if d.v <= 0 {
			errs = append(errs, fmt.Errorf("gateway: %s must be positive, got %v", d.name, d.v))
		}
	}
	if c.DisconnectGrace < 0 {
		errs = append(errs, fmt.Errorf("gateway: disconnect grace must not be negative, got %v", c.DisconnectGrace))
	}
	if c.MaxKeyLength < 0 || c.MaxOwnerLength < 0 || c.MaxParamsBytes < 0 || c.MaxConnections < 0 || c.MaxConnectionsPerIP < 0 || c.RequestsPerSecond < 0 {
		errs = append(errs, errors.New("gateway: limits must not be negative"))
	}
	return errors.Join(errs...)
}
