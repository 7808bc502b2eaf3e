package nacoslock

import (
	"crypto/tls"
	"log/slog"
	"time"
)

// clientVersion is what ConnectionSetupRequest reports; the server lists
// it in /v1/connections.
const clientVersion = "nacos-lockd-go:v1"

type options struct {
	username, password string
	token              string
	tls                *tls.Config
	loginTLS           *tls.Config
	loginTLSSet        bool
	namespace          string
	name               string
	log                *slog.Logger
	requestTimeout     time.Duration
}

func defaultOptions() options {
	return options{
		name:           "unknown", // the Java client's AppName when none is set
		log:            slog.New(slog.DiscardHandler),
		requestTimeout: 3 * time.Second,
	}
}

// Option configures Dial.
type Option func(*options)

// WithAuth logs in with a username and password through the Nacos login
// route on the servers' main port, sends the token with every lock request
// and logs in again before the token's TTL runs out (and at once when a
// server says the token is no longer valid).
func WithAuth(username, password string) Option {
	return func(o *options) { o.username, o.password = username, password }
}

// WithAccessToken sends a token obtained elsewhere (nacos-lockctl login)
// with every lock request, for tools that hold a token rather than a
// password. It is never refreshed; WithAuth wins when both are given.
func WithAccessToken(token string) Option {
	return func(o *options) { o.token = token }
}

// WithTLS connects to the SDK port with TLS (the server's
// nacos.remote.server.rpc.tls.* properties). The login, when WithAuth is
// set, uses HTTPS with the same configuration unless WithLoginTLS says
// otherwise.
func WithTLS(cfg *tls.Config) Option {
	return func(o *options) { o.tls = cfg }
}

// WithLoginTLS sets the TLS configuration of the login on the main port
// (the server's server.ssl.* properties) when it differs from the SDK
// port's; nil means plain HTTP.
func WithLoginTLS(cfg *tls.Config) Option {
	return func(o *options) { o.loginTLS, o.loginTLSSet = cfg, true }
}

// WithNamespace sends a namespace (tenant) in the connection setup, as a
// Nacos client configured with one does. Lock names are global to the
// server whatever the namespace (Nacos locks are keyed by type and key
// only); the server only records it with the connection.
func WithNamespace(ns string) Option {
	return func(o *options) { o.namespace = ns }
}

// WithClientName names the application: the server shows it as the
// connection's appName in /v1/connections and in its logs.
func WithClientName(name string) Option {
	return func(o *options) { o.name = name }
}

// WithLogger receives the client's own log lines: connections made and
// lost, logins, renewals that failed, locks lost. Nothing is logged at
// Info or above per lock call. Tokens and passwords are never logged.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithRequestTimeout bounds each attempt of one request to one server
// (default 3 s, the Java lock client's); a caller's shorter deadline wins.
func WithRequestTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.requestTimeout = d
		}
	}
}
