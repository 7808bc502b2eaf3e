package compat

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"

	"nacos-lockd/settings"
)

// LockSettings are the lock service's limits, read from Nacos properties.
// Durations are in milliseconds, as Nacos writes them. Each field's tag
// binds it to its declaration in package settings, which gives its
// property name, default and range.
type LockSettings struct {
	DefaultLeaseMs    int64 `setting:"nacos.lock.default_expire_time"`
	MaxLeaseMs        int64 `setting:"nacos.lock.max_expire_time"`
	ScanIntervalMs    int64 `setting:"nacos.lock.expire.scan.interval"`
	DisconnectGraceMs int64 `setting:"nacos.lock.disconnect_grace_ms"`
	MaxWaitMs         int64 `setting:"nacos.lock.max_wait_time"`
	MaxKeyLength      int   `setting:"nacos.lock.max_key_length"`
	MaxOwnerLength    int   `setting:"nacos.lock.max_owner_length"`
	MaxParamsBytes    int   `setting:"nacos.lock.max_params_bytes"`
	MaxConnections    int   `setting:"nacos.lock.max_connections"`
	MaxConnsPerIP     int   `setting:"nacos.lock.max_connections_per_ip"`
	MaxRequestsPerSec int   `setting:"nacos.lock.max_requests_per_second"`
	MaxLocks          int64 `setting:"nacos.lock.max_locks"`
	MaxWaitersPerLock int64 `setting:"nacos.lock.max_waiters_per_lock"`
	RequestTimeoutMs  int64 `setting:"nacos.lock.request_timeout"`
	NodeGraceMs       int64 `setting:"nacos.lock.node_grace_ms"`
	SnapshotEntries   int64 `setting:"nacos.lock.raft.snapshot_entries"`
	// ElectionTimeoutMs is 0 when unset: cmd picks the mode's default
	// (settings.ElectionTimeoutMs).
	ElectionTimeoutMs int64 `setting:"nacos.lock.raft.election_timeout_ms"`
}

const (
	// MaxMillis bounds every duration property (settings.MaxMillis).
	MaxMillis = settings.MaxMillis
	// MaxKeyLengthLimit bounds PropLockMaxKeyLength
	// (settings.MaxKeyLengthLimit).
	MaxKeyLengthLimit = settings.MaxKeyLengthLimit
)

// DefaultLockSettings returns the settings used when no property is set.
func DefaultLockSettings() LockSettings {
	var s LockSettings
	settings.FillDefaults(&s)
	return s
}

// LockSettingsFrom reads the lock properties from p, applying defaults for
// those absent or empty, and validates the result. The error joins one
// *PropertyError per problem, each naming the property and its value.
func LockSettingsFrom(p Properties) (LockSettings, error) {
	s := DefaultLockSettings()
	var errs []error
	for _, f := range settings.Fields(&s) {
		key := f.Setting.Prop
		var v int64
		var err error
		if f.Type().Kind() == reflect.Int { // Int's range check, as before
			var n int
			n, err = p.Int(key, int(f.Int()))
			v = int64(n)
		} else {
			v, err = p.Int64(key, f.Int())
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		f.SetInt(v)
	}
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
	// Each field's range is its declaration's.
	for _, f := range settings.Fields(&s) {
		if reason := f.Setting.CheckInt(f.Int()); reason != "" {
			fail(f.Setting.Prop, f.Int(), reason)
		}
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
		if reason := settings.MainPort.CheckInt(int64(port)); reason != "" {
			return 0, true, &PropertyError{Key: key, Value: p[key], Reason: reason}
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
