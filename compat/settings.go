package compat

import (
	"errors"
	"fmt"
	"strconv"
)

// LockSettings are the lock service's limits, read from Nacos properties.
// Durations are in milliseconds, as Nacos writes them.
type LockSettings struct {
	DefaultLeaseMs    int64 // PropLockDefaultExpireTime
	MaxLeaseMs        int64 // PropLockMaxExpireTime
	ScanIntervalMs    int64 // PropLockExpireScanInterval
	DisconnectGraceMs int64 // PropLockDisconnectGrace
	MaxWaitMs         int64 // PropLockMaxWaitTime
	MaxKeyLength      int   // PropLockMaxKeyLength
	MaxOwnerLength    int   // PropLockMaxOwnerLength
	MaxParamsBytes    int   // PropLockMaxParamsBytes
	MaxConnections    int   // PropLockMaxConnections
	MaxConnsPerIP     int   // PropLockMaxConnectionsPerIP
	MaxRequestsPerSec int   // PropLockMaxRequestsPerSecond
	MaxLocks          int64 // PropLockMaxLocks
	MaxWaitersPerLock int64 // PropLockMaxWaitersPerLock
	RequestTimeoutMs  int64 // PropLockRequestTimeout
	NodeGraceMs       int64 // PropLockNodeGrace
	SnapshotEntries   int64 // PropRaftSnapshotEntries
	// ElectionTimeoutMs is 0 when unset: cmd picks 10 ms for a single
	// node and 300 ms for a cluster.
	ElectionTimeoutMs int64 // PropRaftElectionTimeout
}

const (
	// MaxMillis bounds every duration property: 100 years, so that an epoch
	// timestamp plus any of them cannot overflow int64, and any of them
	// converts to a time.Duration (which ends at ~292 years).
	MaxMillis = 100 * 365 * 24 * 3600 * 1000
	// MaxKeyLengthLimit bounds PropLockMaxKeyLength: badger refuses keys over
	// 65000 bytes, and the lock table stores a lock under its key plus a
	// short prefix.
	MaxKeyLengthLimit = 60_000
)

// DefaultLockSettings returns the settings used when no property is set.
func DefaultLockSettings() LockSettings {
	return LockSettings{
		DefaultLeaseMs:    DefaultLockDefaultExpireMs,
		MaxLeaseMs:        DefaultLockMaxExpireMs,
		ScanIntervalMs:    DefaultLockScanIntervalMs,
		DisconnectGraceMs: DefaultLockDisconnectMs,
		MaxWaitMs:         DefaultLockMaxWaitMs,
		MaxKeyLength:      DefaultLockMaxKeyLength,
		MaxOwnerLength:    DefaultLockMaxOwnerLength,
		MaxParamsBytes:    DefaultLockMaxParamsBytes,
		MaxConnections:    DefaultLockMaxConnections,
		MaxConnsPerIP:     DefaultLockMaxConnectionsPerIP,
		MaxRequestsPerSec: DefaultLockMaxRequestsPerSecond,
		MaxLocks:          DefaultLockMaxLocks,
		MaxWaitersPerLock: DefaultLockMaxWaitersPerLock,
		RequestTimeoutMs:  DefaultLockRequestTimeoutMs,
		NodeGraceMs:       DefaultLockNodeGraceMs,
		SnapshotEntries:   DefaultRaftSnapshotEntries,
	}
}

// LockSettingsFrom reads the lock properties from p, applying defaults for
// those absent or empty, and validates the result. The error joins one
// *PropertyError per problem, each naming the property and its value.
func LockSettingsFrom(p Properties) (LockSettings, error) {
	s := DefaultLockSettings()
	var errs []error
	readInt64 := func(key string, dst *int64) {
		v, err := p.Int64(key, *dst)
		if err != nil {
			errs = append(errs, err)
			return
		}
		*dst = v
	}
	readInt := func(key string, dst *int) {
		v, err := p.Int(key, *dst)
		if err != nil {
			errs = append(errs, err)
			return
		}
		*dst = v
	}
	readInt64(PropLockDefaultExpireTime, &s.DefaultLeaseMs)
	readInt64(PropLockMaxExpireTime, &s.MaxLeaseMs)
	readInt64(PropLockExpireScanInterval, &s.ScanIntervalMs)
	readInt64(PropLockDisconnectGrace, &s.DisconnectGraceMs)
	readInt64(PropLockMaxWaitTime, &s.MaxWaitMs)
	readInt(PropLockMaxKeyLength, &s.MaxKeyLength)
	readInt(PropLockMaxOwnerLength, &s.MaxOwnerLength)
	readInt(PropLockMaxParamsBytes, &s.MaxParamsBytes)
	readInt(PropLockMaxConnections, &s.MaxConnections)
	readInt(PropLockMaxConnectionsPerIP, &s.MaxConnsPerIP)
	readInt(PropLockMaxRequestsPerSecond, &s.MaxRequestsPerSec)
	readInt64(PropLockMaxLocks, &s.MaxLocks)
	readInt64(PropLockMaxWaitersPerLock, &s.MaxWaitersPerLock)
	readInt64(PropLockRequestTimeout, &s.RequestTimeoutMs)
	readInt64(PropLockNodeGrace, &s.NodeGraceMs)
	readInt64(PropRaftSnapshotEntries, &s.SnapshotEntries)
	readInt64(PropRaftElectionTimeout, &s.ElectionTimeoutMs)
	if len(errs) > 0 {
		return LockSettings{}, errors.Join(errs...)
	}
	if err := s.validate(p); err != nil {
		return LockSettings{}, err
	}
	return s, nil
}

// Validate checks the settings against the same rules as LockSettingsFrom,
// for settings built in code.
func (s LockSettings) Validate() error {
	return s.validate(nil)
}

// validate reports every broken rule. p, when given, supplies the values as
// written for the error messages.
func (s LockSettings) validate(p Properties) error {
	var errs []error
	fail := func(key string, v int64, reason string) {
		value := strconv.FormatInt(v, 10)
		if raw, ok := p[key]; ok {
			value = raw
		}
		errs = append(errs, &PropertyError{Key: key, Value: value, Reason: reason})
	}
	between := func(key string, v, lo, hi int64) {
		if v < lo || v > hi {
			fail(key, v, fmt.Sprintf("must be between %d and %d", lo, hi))
		}
	}
	between(PropLockDefaultExpireTime, s.DefaultLeaseMs, 1, MaxMillis)
	between(PropLockMaxExpireTime, s.MaxLeaseMs, 1, MaxMillis)
	between(PropLockExpireScanInterval, s.ScanIntervalMs, 1, MaxMillis)
	between(PropLockDisconnectGrace, s.DisconnectGraceMs, 0, MaxMillis)
	between(PropLockMaxWaitTime, s.MaxWaitMs, 1, MaxMillis)
	between(PropLockMaxKeyLength, int64(s.MaxKeyLength), 1, MaxKeyLengthLimit)
	// No upper bound of our own: the gateway's message size limit caps what
	// a client can send anyway.
	between(PropLockMaxOwnerLength, int64(s.MaxOwnerLength), 1, 1<<31-1)
	between(PropLockMaxParamsBytes, int64(s.MaxParamsBytes), 0, 1<<24)
	between(PropLockMaxConnections, int64(s.MaxConnections), 1, 1<<24)
	between(PropLockMaxConnectionsPerIP, int64(s.MaxConnsPerIP), 1, 1<<24)
	between(PropLockMaxRequestsPerSecond, int64(s.MaxRequestsPerSec), 1, 1<<30)
	between(PropLockMaxLocks, s.MaxLocks, 1, 1<<40)
	between(PropLockMaxWaitersPerLock, s.MaxWaitersPerLock, 1, 1<<32-1)
	between(PropLockRequestTimeout, s.RequestTimeoutMs, 1, MaxMillis)
	between(PropLockNodeGrace, s.NodeGraceMs, 1, MaxMillis)
	between(PropRaftSnapshotEntries, s.SnapshotEntries, 10, 1<<40)
	if s.ElectionTimeoutMs != 0 {
		between(PropRaftElectionTimeout, s.ElectionTimeoutMs, 10, 60_000)
	}
	// A default lease above the cap would be cut down on every request that
	// asks for the default; say so at startup instead.
	if s.DefaultLeaseMs > 0 && s.MaxLeaseMs > 0 && s.MaxLeaseMs < s.DefaultLeaseMs {
		fail(PropLockMaxExpireTime, s.MaxLeaseMs, fmt.Sprintf("must be at least %s (%d)",
			PropLockDefaultExpireTime, s.DefaultLeaseMs))
	}
	return errors.Join(errs...)
}

// ServerPort returns the main port and whether the file sets it: Nacos
// 3.x's PropMainPort if present, else Nacos 2.x's PropServerPort (so an old
// application.properties keeps working), else DefaultServerPort with
// present=false. An empty value counts as absent, as in Nacos.
func ServerPort(p Properties) (port int, present bool, err error) {
	for _, key := range []string{PropMainPort, PropServerPort} {
		if _, ok := p.lookup(key); !ok {
			continue
		}
		port, err := p.Int(key, DefaultServerPort)
		if err != nil {
			return 0, true, err
		}
		if port < 1 || port > 65535 {
			return 0, true, &PropertyError{Key: key, Value: p[key], Reason: "must be between 1 and 65535"}
		}
		return port, true, nil
	}
	return DefaultServerPort, false, nil
}

// IPAddress returns this node's address from PropIPAddress, trimmed, or
// DefaultIPAddress when it is absent or empty. It is not resolved or
// checked here: cmd decides what a bad address means.
func IPAddress(p Properties) string {
	if v, ok := p.lookup(PropIPAddress); ok {
		return v
	}
	return DefaultIPAddress
}
