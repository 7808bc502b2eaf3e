package compat

import "nacos-lockd/settings"

// The Nacos property names nacos-lockd reads and their defaults, as
// compat's callers name them. Each is declared once, with its range and
// doc line, in package settings (settings/table.go); these only name the
// declarations' values.
var (
	// PropMainPort is the main (HTTP) port in Nacos 3.x; clients reach gRPC
	// at this port + 1000.
	PropMainPort = settings.MainPort.Prop
	// PropServerPort is the main port's name in Nacos 2.x (Spring Boot's
	// own). Nacos 3.x files use PropMainPort; ServerPort reads both.
	PropServerPort = settings.MainPort.Alias
	// PropIPAddress is this node's IP address.
	PropIPAddress = settings.IPAddress.Prop

	PropLockDefaultExpireTime    = settings.LockDefaultExpireTime.Prop
	PropLockMaxExpireTime        = settings.LockMaxExpireTime.Prop
	PropLockExpireScanInterval   = settings.LockExpireScanInterval.Prop
	PropLockDisconnectGrace      = settings.LockDisconnectGrace.Prop
	PropLockMaxWaitTime          = settings.LockMaxWaitTime.Prop
	PropLockMaxKeyLength         = settings.LockMaxKeyLength.Prop
	PropLockMaxOwnerLength       = settings.LockMaxOwnerLength.Prop
	PropLockMaxParamsBytes       = settings.LockMaxParamsBytes.Prop
	PropLockMaxConnections       = settings.LockMaxConnections.Prop
	PropLockMaxConnectionsPerIP  = settings.LockMaxConnectionsPerIP.Prop
	PropLockMaxRequestsPerSecond = settings.LockMaxRequestsPerSecond.Prop
	PropLockMaxLocks             = settings.LockMaxLocks.Prop
	PropLockMaxWaitersPerLock    = settings.LockMaxWaitersPerLock.Prop
	PropLockRequestTimeout       = settings.LockRequestTimeout.Prop
	PropLockNodeGrace            = settings.LockNodeGrace.Prop
	PropRaftSnapshotEntries      = settings.RaftSnapshotEntries.Prop
	PropRaftElectionTimeout      = settings.RaftElectionTimeout.Prop
)

// Defaults for the properties above.
var (
	DefaultServerPort = int(settings.MainPort.DefaultInt())
	// DefaultIPAddress is used when PropIPAddress is unset: right for a
	// single node, which only its own host needs to reach.
	DefaultIPAddress = settings.IPAddress.DefaultString()

	DefaultLockDefaultExpireMs = settings.LockDefaultExpireTime.DefaultInt()
)
