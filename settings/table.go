package settings

import (
	"fmt"
	"time"
)

// Bounds and defaults that other code needs as constants.
const (
	// MaxMillis bounds every duration property: 100 years, so that an epoch
	// timestamp plus any of them cannot overflow int64, and any of them
	// converts to a time.Duration (which ends at ~292 years).
	MaxMillis = 100 * 365 * 24 * 3600 * 1000
	// MaxKeyLengthLimit bounds LockMaxKeyLength: badger refuses keys over
	// 65000 bytes, and the lock table stores a lock under its key plus a
	// short prefix.
	MaxKeyLengthLimit = 60_000

	// ElectionTimeoutSingleMs and ElectionTimeoutClusterMs are the Raft
	// election timeout when RaftElectionTimeout is unset: a single node has
	// nobody to wait for (it becomes leader 30 to 60 ms after it starts,
	// and its Raft clock ticks every 10 ms), and 300 ms in a cluster rides
	// out GC and scheduling pauses on a busy host while keeping failover
	// well under a second.
	ElectionTimeoutSingleMs  = 30
	ElectionTimeoutClusterMs = 300

	// DefaultCoalesceWindow is CoalesceWindow's default. 20 ms: W5 (1000
	// renews/s from 10k holders) cost 116-137 µs of server CPU per renew
	// against 141-166 with 5 ms (pinned, A B B A), and no other workload
	// waits for it (W1 and W2 level in ab).
	DefaultCoalesceWindow = 20 * time.Millisecond
	// DefaultTimerSlack is TimerSlack's default (package
	// internal/timerslack says why and what it was measured to save).
	DefaultTimerSlack = 2 * time.Millisecond
)

// ElectionTimeoutMs is the election timeout for a RaftElectionTimeout
// value: v itself, or when it is 0 (unset) the default of the mode.
func ElectionTimeoutMs(v int64, cluster bool) int64 {
	switch {
	case v != 0:
		return v
	case cluster:
		return ElectionTimeoutClusterMs
	}
	return ElectionTimeoutSingleMs
}

// RaftTicks is how a node counts an election timeout of electionMs in
// ticks of its Raft clock: the tick's length, the timeout's ticks and the
// heartbeat's. Every tick wakes the replica's step worker, so the tick is
// as coarse as the timeout allows: in a cluster 1 ms (5 ms for long
// timeouts), about ten ticks to the timeout, which a randomized timeout
// needs to keep candidates apart; a single node, where nobody else votes
// and the timeout only delays becoming leader at start, three ticks to the
// timeout (the fewest dragonboat allows beside one-tick heartbeats). With
// 1 ms ticks an idle single node spent 3.9% of a core on them.
func RaftTicks(electionMs int64, singleNode bool) (rttMs, electionRTT, heartbeatRTT uint64) {
	rttMs = 1
	switch {
	case singleNode:
		rttMs = max(1, uint64(electionMs)/singleNodeElectionTicks)
	case electionMs > 50:
		rttMs = 5
	}
	electionRTT = max(singleNodeElectionTicks, uint64(electionMs)/rttMs)
	return rttMs, electionRTT, max(1, electionRTT/10)
}

// singleNodeElectionTicks is a single node's election timeout in ticks,
// and the fewest any node gets: dragonboat wants it above twice the
// heartbeat's one tick.
const singleNodeElectionTicks = 3

// The declarations, one per setting, in the order the README lists them.
// Adding a setting: declare it here, then bind it where it is used (a
// `setting:"<property>"` tag on a LockSettings or gateway.Config field, or
// a read of the declaration), and run `make settings-readme`.

// The node: ports, address, files, logs.
var (
	MainPort = declare(Setting{
		Prop: "nacos.server.main.port", Alias: "server.port", Flag: "port", Env: "NACOS_LOCKD_PORT",
		Kind: Int, Default: int64(8848), Min: 1, Max: 65535, Nacos: true,
		Doc: "main port (Nacos server.port): HTTP admin API; SDK gRPC listens on port+1000, Raft on port-1000",
	})
	IPAddress = declare(Setting{
		Prop: "nacos.inetutils.ip-address", Flag: "ip", Env: "NACOS_LOCKD_IP", FlagUnset: true,
		Kind: String, Default: "127.0.0.1", Nacos: true,
		Doc: "this node's address as listed in cluster.conf, an IP or a DNS name (nacos.inetutils.ip-address); default 127.0.0.1, and with cluster.conf members listed by name, the member named by the host name or resolving to an address of this machine",
	})
	DataDir = declare(Setting{
		Flag: "data-dir", Env: "NACOS_LOCKD_DATA_DIR", Kind: String, Default: "./data",
		Doc: "directory for the lock table and the Raft log",
	})
	ConfigFile = declare(Setting{
		Flag: "config", Env: "NACOS_LOCKD_CONFIG", Kind: String, Default: "",
		Doc: "Nacos-style properties file (application.properties)",
	})
	ClusterConf = declare(Setting{
		Flag: "cluster-conf", Env: "NACOS_LOCKD_CLUSTER_CONF", Kind: String, Default: "",
		Doc: "Nacos cluster.conf: one ip:port or name:port (main port) per member; omit for a single node",
	})
	Join = declare(Setting{
		Flag: "join", Kind: Bool, Default: false,
		Doc: "start as a new member of a running cluster (after `nacos-lockctl cluster add`)",
	})
	LogLevel = declare(Setting{
		Flag: "log-level", Env: "NACOS_LOCKD_LOG_LEVEL", Kind: String, Default: "info",
		Choices: []string{"trace", "debug", "info", "warn", "error"},
		Doc:     "log level: trace, debug, info, warn, error",
	})
	LogFormat = declare(Setting{
		Flag: "log-format", Env: "NACOS_LOCKD_LOG_FORMAT", Kind: String, Default: "json",
		Choices: []string{"json", "console"},
		Doc:     "log format: json or console",
	})
	ImportNacos = declare(Setting{
		Flag: "import-nacos", Env: "NACOS_LOCKD_IMPORT_NACOS", Kind: String, Default: "",
		Doc: "import a Nacos lock snapshot (snapshot_N dir or nacos_lock.zip) into the empty data dir before starting",
	})
	CoalesceWindow = declare(Setting{
		Flag: "coalesce-window", Env: "NACOS_LOCKD_COALESCE_WINDOW",
		Kind: Duration, Default: DefaultCoalesceWindow, Min: 0, Max: int64(time.Second), Zero: "off",
		Doc: "lock commands that arrive while earlier ones commit share the next Raft entry, and renews that come in quick succession wait up to this long for company (saves CPU per renew; such a renew is answered up to this much later; a renew after a quieter spell, a renew of a lease under a second, and every other command at once); 0 turns batching off: every command its own entry and every claim a Raft entry",
	})
	Transport = declare(Setting{
		Flag: "transport", Env: "NACOS_LOCKD_TRANSPORT", Kind: String, Default: "h2",
		Choices: []string{"h2", "grpc"},
		Doc:     "the SDK port's gRPC server: h2, our lean HTTP/2 server for the two Nacos methods (package transport/h2grpc: less CPU per call, more calls per second), or grpc, grpc-go's server (the default until December 2026, kept as the fallback)",
	})
	RaftLog = declare(Setting{
		Flag: "raft-log", Env: "NACOS_LOCKD_RAFT_LOG", Kind: String, Default: "lockd",
		Choices: []string{"lockd", "pebble"},
		Doc:     "the Raft log a new data dir keeps: lockd, our own (package replica/raftlog: one direct synced write per Raft update, less CPU per lock command), or pebble, dragonboat's own log; a data dir keeps the log it was made with, and data dirs made before December 2026 keep pebble",
	})
	RaftEngine = declare(Setting{
		Flag: "raft-engine", Env: "NACOS_LOCKD_RAFT_ENGINE", Kind: String, Default: "solo",
		Choices: []string{"solo", "raft"},
		Doc:     "what orders and logs a single node's lock commands on a new data dir: solo, the single-node engine (package replica, solo.go: no Raft, the same log and table, less CPU per lock command; such a node cannot grow into a cluster with `cluster add`), or raft, dragonboat as a cluster's members run it (a single node that may grow later); a data dir keeps the engine it was made with, data dirs made before December 2026 keep raft, and cluster members always run raft",
	})
	Profiling = declare(Setting{
		Flag: "pprof", Env: "NACOS_LOCKD_PPROF", Kind: Bool, Default: false,
		Doc: "serve Go's profiles and execution traces (net/http/pprof) under /debug/pprof/ on the main port, guarded like the admin API (a global admin's token when auth is on); off by default, since a CPU profile or trace costs CPU while it runs",
	})
	TimerSlack = declare(Setting{
		Flag: "timer-slack", Env: "NACOS_LOCKD_TIMER_SLACK",
		Kind: Duration, Default: DefaultTimerSlack, Min: 0, Max: int64(10 * time.Millisecond), Zero: "the slack the process was started with",
		Doc: "how late the kernel may end this process's timed sleeps (Linux timer slack, set for every thread by starting the program once more at start-up): Go's runtime monitor sleeps 20 µs at a time while the server is busy, and a wider slack folds those wake-ups together (6-22% less server CPU per lock operation, measured); every timer may fire up to this much later",
	})
	ShowVersion = declare(Setting{
		Flag: "version", Kind: Bool, Default: false,
		Doc: "print the version, commit and build date, then exit",
	})
	TestHooks = declare(Setting{
		Flag: "test-hooks", Kind: String, Default: "",
		Doc: "TEST ONLY, never in production: a control file through which the chaos suite injects clock offsets, storage faults and leader transfers",
	})
)

// The lock service: leases, waits, limits.
var (
	LockDefaultExpireTime = declare(Setting{
		Prop: "nacos.lock.default_expire_time", Kind: Millis, Default: int64(30_000), Min: 1, Max: MaxMillis, Nacos: true,
		Doc: "lease when a client sends `expiredTime < 0`",
	})
	LockMaxExpireTime = declare(Setting{
		Prop: "nacos.lock.max_expire_time", Kind: Millis, Default: int64(1_800_000), Min: 1, Max: MaxMillis, Nacos: true,
		Doc: "longer leases are capped to this; at least nacos.lock.default_expire_time",
	})
	LockExpireScanInterval = declare(Setting{
		Prop: "nacos.lock.expire.scan.interval", Kind: Millis, Default: int64(1_000), Min: 1, Max: MaxMillis, Nacos: true,
		Doc: "how often the leader's reaper ends expired leases",
	})
	LockDisconnectGrace = declare(Setting{
		Prop: "nacos.lock.disconnect_grace_ms", Kind: Millis, Default: int64(0), Min: 0, Max: MaxMillis,
		Doc: "wait after a client connection closes before its locks are released (0: at once, as Nacos 3.3)",
	})
	LockMaxWaitTime = declare(Setting{
		Prop: "nacos.lock.max_wait_time", Kind: Millis, Default: int64(1_800_000), Min: 1, Max: MaxMillis,
		Doc: "longer queue waits (`waitTimeMs`) are capped to this",
	})
	LockMaxKeyLength = declare(Setting{
		Prop: "nacos.lock.max_key_length", Kind: Int, Unit: "bytes", Default: int64(4096), Min: 1, Max: MaxKeyLengthLimit,
		Doc: "longer keys are rejected",
	})
	LockMaxOwnerLength = declare(Setting{
		// No upper bound of our own: the gateway's message size limit caps
		// what a client can send anyway.
		Prop: "nacos.lock.max_owner_length", Kind: Int, Unit: "bytes", Default: int64(1024), Min: 1, Max: 1<<31 - 1,
		Doc: "longer `owner` strings are rejected",
	})
	LockMaxParamsBytes = declare(Setting{
		Prop: "nacos.lock.max_params_bytes", Kind: Int, Unit: "bytes", Default: int64(4096), Min: 0, Max: 1 << 24,
		Doc: "larger `params` objects are rejected",
	})
	LockMaxConnections = declare(Setting{
		Prop: "nacos.lock.max_connections", Kind: Int, Default: int64(10_000), Min: 1, Max: 1 << 24,
		Doc: "registered connections in total",
	})
	LockMaxConnectionsPerIP = declare(Setting{
		Prop: "nacos.lock.max_connections_per_ip", Kind: Int, Default: int64(256), Min: 1, Max: 1 << 24,
		Doc: "registered connections per peer address",
	})
	LockMaxRequestsPerSecond = declare(Setting{
		Prop: "nacos.lock.max_requests_per_second", Kind: Int, Default: int64(2000), Min: 1, Max: 1 << 30,
		Doc: "lock requests per second per connection",
	})
	LockMaxLocks = declare(Setting{
		Prop: "nacos.lock.max_locks", Kind: Int, Default: int64(2_000_000), Min: 1, Max: 1 << 40,
		Doc: "lock entries the table may hold (a memory guard; existing locks keep working)",
	})
	LockMaxWaitersPerLock = declare(Setting{
		Prop: "nacos.lock.max_waiters_per_lock", Kind: Int, Default: int64(10_000), Min: 1, Max: 1<<32 - 1,
		Doc: "waiters queued on one lock",
	})
	LockRequestTimeout = declare(Setting{
		// Below the 3.0-line client's 3 s request timeout: the client should
		// get our answer rather than give up and resend the request.
		Prop: "nacos.lock.request_timeout", Kind: Millis, Default: int64(2_500), Min: 1, Max: MaxMillis,
		Doc: "how long a lock request may wait for Raft to commit; below the 3.0-line client's 3 s timeout so it gets an answer instead of resending",
	})
	LockNodeGrace = declare(Setting{
		Prop: "nacos.lock.node_grace_ms", Kind: Millis, Default: int64(15_000), Min: 1, Max: MaxMillis,
		Doc: "cluster: how long a node may be unreachable before the leader releases its clients' locks",
	})
	RaftElectionTimeout = declare(Setting{
		Prop: "nacos.lock.raft.election_timeout_ms", Kind: Millis, Default: int64(0), Min: 10, Max: 60_000,
		Zero:        "the mode's default",
		DefaultText: fmt.Sprintf("%d (single node) / %d (cluster)", ElectionTimeoutSingleMs, ElectionTimeoutClusterMs),
		Doc:         "Raft election timeout; in a cluster, heartbeats every tenth of it",
	})
	RaftSnapshotEntries = declare(Setting{
		Prop: "nacos.lock.raft.snapshot_entries", Kind: Int, Default: int64(10_000), Min: 10, Max: 1 << 40,
		Doc: "applied entries between Raft snapshots (log compaction)",
	})
)

// Authentication.
var (
	AuthEnabled = declare(Setting{
		Prop: "nacos.core.auth.enabled", Kind: Bool, Default: false, Nacos: true,
		Doc: "require a valid accessToken for every lock request and the admin API (see Security)",
	})
	AuthSecretKey = declare(Setting{
		Prop: "nacos.core.auth.plugin.nacos.token.secret.key", Kind: String, Default: "", Nacos: true,
		Doc: "the tokens' HS256 key: base64 of at least 32 bytes; required with auth on",
	})
	AuthTokenExpire = declare(Setting{
		Prop: "nacos.core.auth.plugin.nacos.token.expire.seconds", Kind: Int, Unit: "s", Default: int64(18_000),
		Min: 1, Max: 10 * 365 * 24 * 3600, Between: "1 second and 10 years", Nacos: true,
		Doc: "lifetime of a token handed out at login",
	})
	AuthUsersFile = declare(Setting{
		Prop: "nacos.lock.auth.users_file", Kind: String, Default: "", DefaultText: "`<data-dir>/users.json`",
		Doc: "the JSON users file",
	})
	ServerIdentityKey = declare(Setting{
		Prop: "nacos.core.auth.server.identity.key", Kind: String, Default: "", Nacos: true,
		Doc: "server identity header name that cluster members send each other; with auth on it lets a node `--join`",
	})
	ServerIdentityValue = declare(Setting{
		Prop: "nacos.core.auth.server.identity.value", Kind: String, Default: "", Nacos: true,
		Doc: "server identity header value",
	})
)

// TLS: Nacos's names for the SDK gRPC port, Spring Boot's PEM names for
// the HTTP main port.
var (
	RPCTLSEnabled = declare(Setting{
		Prop: "nacos.remote.server.rpc.tls.enableTls", Kind: Bool, Default: false, Nacos: true,
		Doc: "serve TLS only on the SDK gRPC port",
	})
	RPCTLSCert = declare(Setting{
		Prop: "nacos.remote.server.rpc.tls.certChainFile", Kind: String, Default: "", Nacos: true,
		Doc: "SDK port: PEM certificate chain",
	})
	RPCTLSKey = declare(Setting{
		Prop: "nacos.remote.server.rpc.tls.certPrivateKey", Kind: String, Default: "", Nacos: true,
		Doc: "SDK port: PEM private key",
	})
	RPCTLSTrust = declare(Setting{
		Prop: "nacos.remote.server.rpc.tls.trustCollectionCertFile", Kind: String, Default: "", Nacos: true,
		Doc: "SDK port: PEM CAs that sign client certificates",
	})
	RPCTLSMutualAuth = declare(Setting{
		Prop: "nacos.remote.server.rpc.tls.mutualAuthEnable", Kind: Bool, Default: false, Nacos: true,
		Doc: "SDK port: require client certificates",
	})
	HTTPSSLEnabled = declare(Setting{
		Prop: "server.ssl.enabled", Kind: Bool, Default: false, Nacos: true,
		Doc: "serve HTTPS only on the main port",
	})
	HTTPSSLCert = declare(Setting{
		Prop: "server.ssl.certificate", Kind: String, Default: "", Nacos: true,
		Doc: "main port: PEM certificate chain",
	})
	HTTPSSLKey = declare(Setting{
		Prop: "server.ssl.certificate-private-key", Kind: String, Default: "", Nacos: true,
		Doc: "main port: PEM private key",
	})
	HTTPSSLTrust = declare(Setting{
		Prop: "server.ssl.trust-certificate", Kind: String, Default: "", Nacos: true,
		Doc: "main port: PEM CAs that sign client certificates",
	})
	HTTPSSLClientAuth = declare(Setting{
		Prop: "server.ssl.client-auth", Kind: String, Default: "none", Choices: []string{"none", "want", "need"}, Nacos: true,
		Doc: "main port: client certificates (with server.ssl.trust-certificate)",
	})
)
