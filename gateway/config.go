package gateway

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"nacos-lockd/connid"
	"nacos-lockd/gateway/auth"
	"nacos-lockd/settings"
)

// Config configures the gateway. Zero values pick the defaults: a
// setting's declared one for a field tagged with it, else the one noted.
type Config struct {
	// ListenAddr is the SDK gRPC address, host:port (main port + 1000).
	ListenAddr string
	// AdvertiseIP and MainPort are what ConnectResetRequest tells clients;
	// an empty IP lets the client pick the next server from its own list.
	AdvertiseIP string
	MainPort    int
	// NodeID makes connection ids unique across a cluster: the node's Raft
	// replica id in decimal, which connection ids end with and the
	// dead-node monitor reads back (package connid). "" leaves it out.
	NodeID string

	// The lock service's settings. Each tag binds the field to its
	// declaration in package settings, which gives its default (used when
	// the field is zero) and its allowed range (Validate).
	DefaultLease    time.Duration `setting:"nacos.lock.default_expire_time"`
	MaxLease        time.Duration `setting:"nacos.lock.max_expire_time"`
	MaxWait         time.Duration `setting:"nacos.lock.max_wait_time"`
	ScanInterval    time.Duration `setting:"nacos.lock.expire.scan.interval"`
	DisconnectGrace time.Duration `setting:"nacos.lock.disconnect_grace_ms"`
	RequestTimeout  time.Duration `setting:"nacos.lock.request_timeout"`
	MaxKeyLength    int           `setting:"nacos.lock.max_key_length"`   // bytes
	MaxOwnerLength  int           `setting:"nacos.lock.max_owner_length"` // bytes
	MaxParamsBytes  int           `setting:"nacos.lock.max_params_bytes"` // bytes of params JSON
	// Table limits, stamped into every ACQUIRE so all replicas enforce the
	// same: lock entries in total (a memory guard) and waiters per lock.
	MaxLocks          uint64 `setting:"nacos.lock.max_locks"`
	MaxWaitersPerLock uint32 `setting:"nacos.lock.max_waiters_per_lock"`

	// Connection and rate limits: exceeding one never affects other clients.
	MaxConnections      int     `setting:"nacos.lock.max_connections"`         // registered connections
	MaxConnectionsPerIP int     `setting:"nacos.lock.max_connections_per_ip"`  // per peer IP
	RequestsPerSecond   float64 `setting:"nacos.lock.max_requests_per_second"` // lock requests/s per connection

	// TLS, when set, makes the SDK port serve TLS only (with client
	// certificates checked if the config asks for them).
	TLS *tls.Config

	// Transport picks the SDK port's gRPC server (--transport): "h2" or ""
	// for package transport/h2grpc, "grpc" for grpc-go's.
	Transport string

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
	// releases the locks its clients held.
	NodeGrace time.Duration `setting:"nacos.lock.node_grace_ms"`
	// NodeCheckInterval is how often the leader checks the other nodes. 1s.
	NodeCheckInterval time.Duration

	// Metrics is where the gateway registers its series; nil records none.
	Metrics prometheus.Registerer
	// Auth, when set, requires a valid accessToken with write permission on
	// the key for every lock request (nacos.core.auth.enabled).
	Auth *auth.Authenticator
}

func (c Config) withDefaults() Config {
	settings.FillDefaults(&c)
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.PushTimeout, 3*time.Second)
	def(&c.ShutdownGrace, 5*time.Second)
	def(&c.ResetDrain, time.Second)
	def(&c.SetupTimeout, 10*time.Second)
	def(&c.NodeCheckInterval, time.Second)
	if c.MaxMessageSize == 0 {
		c.MaxMessageSize = 10 << 20
	}
	if c.PushQueue == 0 {
		c.PushQueue = 1024
	}
	return c
}

// Validate reports settings that cannot work: no listen address, or a
// setting outside its declared range (each error names the field, its
// property and the range).
func (c Config) Validate() error {
	c = c.withDefaults()
	var errs []error
	if c.ListenAddr == "" {
		errs = append(errs, errors.New("gateway: listen address is required"))
	}
	if err := settings.Check(&c); err != nil {
		errs = append(errs, fmt.Errorf("gateway: %w", err))
	}
	if c.Transport != "" && !settings.Transport.CheckChoice(c.Transport) {
		errs = append(errs, fmt.Errorf("gateway: transport %q: want %s", c.Transport, settings.Transport.ChoiceList()))
	}
	if c.NodeID != "" && !connid.ValidNode(c.NodeID) {
		errs = append(errs, fmt.Errorf("gateway: node id must be a replica id in decimal, got %q", c.NodeID))
	}
	return errors.Join(errs...)
}
