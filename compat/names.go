package compat

// Nacos property names nacos-lockd reads, and their defaults, in one place.
// Names marked "nacos-lockd" are our additions, styled after Nacos's so they
// sit naturally in the same application.properties.
const (
	// PropMainPort is the main (HTTP) port in Nacos 3.x; clients reach gRPC
	// at this port + 1000.
	PropMainPort = "nacos.server.main.port"
	// PropServerPort is the main port's name in Nacos 2.x (Spring Boot's
	// own). Nacos 3.x files use PropMainPort; ServerPort reads both.
	PropServerPort = "server.port"
	// PropIPAddress is this node's IP address.
	PropIPAddress = "nacos.inetutils.ip-address"

	// PropLockDefaultExpireTime is the lease, in ms, for a request that
	// sends a negative expiredTime (clients send -1 for "default").
	PropLockDefaultExpireTime = "nacos.lock.default_expire_time"
	// PropLockMaxExpireTime caps a requested lease, in ms.
	PropLockMaxExpireTime = "nacos.lock.max_expire_time"
	// PropLockExpireScanInterval is the delay, in ms, between passes of the
	// expiry scanner.
	PropLockExpireScanInterval = "nacos.lock.expire.scan.interval"
	// PropLockDisconnectGrace is how long, in ms, a closed connection's
	// locks are kept before cleanup is proposed (nacos-lockd; 0 is Nacos
	// 3.3's behaviour).
	PropLockDisconnectGrace = "nacos.lock.disconnect_grace_ms"
	// PropLockMaxWaitTime caps, in ms, how long a waiter may ask to wait
	// (nacos-lockd).
	PropLockMaxWaitTime = "nacos.lock.max_wait_time"
	// PropLockMaxKeyLength caps a lock key, in bytes (nacos-lockd).
	PropLockMaxKeyLength = "nacos.lock.max_key_length"
	// PropLockMaxOwnerLength caps a lock owner, in bytes (nacos-lockd).
	PropLockMaxOwnerLength = "nacos.lock.max_owner_length"
	// Limits (nacos-lockd): bytes of a request's params JSON, registered
	// connections in total and per peer IP, lock requests per second per
	// connection.
	PropLockMaxParamsBytes       = "nacos.lock.max_params_bytes"
	PropLockMaxConnections       = "nacos.lock.max_connections"
	PropLockMaxConnectionsPerIP  = "nacos.lock.max_connections_per_ip"
	PropLockMaxRequestsPerSecond = "nacos.lock.max_requests_per_second"
	// Table limits (nacos-lockd): lock entries in total, waiters per lock.
	PropLockMaxLocks          = "nacos.lock.max_locks"
	PropLockMaxWaitersPerLock = "nacos.lock.max_waiters_per_lock"
	// PropLockRequestTimeout is how long, in ms, a lock request may wait for
	// Raft (nacos-lockd).
	PropLockRequestTimeout = "nacos.lock.request_timeout"
	// PropLockNodeGrace is how long, in ms, a cluster node may be
	// unreachable before the leader releases the locks of the clients that
	// were connected to it (nacos-lockd).
	PropLockNodeGrace = "nacos.lock.node_grace_ms"
	// PropRaftSnapshotEntries is how many applied entries trigger a Raft
	// snapshot and log compaction (nacos-lockd).
	PropRaftSnapshotEntries = "nacos.lock.raft.snapshot_entries"
	// PropRaftElectionTimeout is the Raft election timeout in ms; heartbeats
	// go every tenth of it (nacos-lockd). Default: 10 ms for a single node,
	// 300 ms for a cluster, which rides out GC and scheduling pauses on a
	// busy host while keeping failover well under a second.
	PropRaftElectionTimeout = "nacos.lock.raft.election_timeout_ms"
)

// Defaults for the properties above.
const (
	DefaultServerPort = 8848
	// DefaultIPAddress is used when PropIPAddress is unset: right for a
	// single node, which only its own host needs to reach.
	DefaultIPAddress = "127.0.0.1"

	DefaultLockDefaultExpireMs      = 30_000
	DefaultLockMaxExpireMs          = 1_800_000
	DefaultLockScanIntervalMs       = 1_000
	DefaultLockDisconnectMs         = 0
	DefaultLockMaxWaitMs            = 1_800_000
	DefaultLockMaxKeyLength         = 4096
	DefaultLockMaxOwnerLength       = 1024
	DefaultLockRequestTimeoutMs     = 2_500
	DefaultLockNodeGraceMs          = 15_000
	DefaultLockMaxParamsBytes       = 4096
	DefaultLockMaxConnections       = 10_000
	DefaultLockMaxConnectionsPerIP  = 256
	DefaultLockMaxRequestsPerSecond = 2000
	DefaultLockMaxLocks             = 2_000_000
	DefaultLockMaxWaitersPerLock    = 10_000
	DefaultRaftSnapshotEntries      = 10_000
)
