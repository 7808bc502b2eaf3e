package compat

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
)

func TestInt64(t *testing.T) {
	const def = 7
	tests := []struct {
		value   string
		want    int64
		wantErr string // substring of the error; "" for none
	}{
		{"42", 42, ""},
		{" 42 \t", 42, ""},
		{"+42", 42, ""},
		{"-42", -42, ""},
		{"0", 0, ""},
		{"010", 10, ""}, // Spring reads decimal, not octal
		{"0x1F", 31, ""},
		{"0X1f", 31, ""},
		{"#1f", 31, ""},
		{"-0x10", -16, ""},
		{"9223372036854775807", 9223372036854775807, ""},
		{"-9223372036854775808", -9223372036854775808, ""},
		{"", def, ""},
		{"   ", def, ""},
		{"9223372036854775808", 0, "out of range"},
		{"-9223372036854775809", 0, "out of range"},
		{"abc", 0, "not an integer"},
		{"1.5", 0, "not an integer"},
		{"1e3", 0, "not an integer"},
		{"1_000", 0, "not an integer"},
		{"--1", 0, "not an integer"},
		{"+-1", 0, "not an integer"},
		{"0x", 0, "not an integer"},
		{"30s", 0, "not an integer"},
	}
	for _, tt := range tests {
		p := Properties{"k.x": tt.value}
		got, err := p.Int64("k.x", def)
		if tt.wantErr == "" {
			if err != nil || got != tt.want {
				t.Errorf("Int64(%q) = %d, %v; want %d", tt.value, got, err, tt.want)
			}
			continue
		}
		var perr *PropertyError
		if !errors.As(err, &perr) || perr.Key != "k.x" || perr.Value != tt.value ||
			!strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "k.x") {
			t.Errorf("Int64(%q): err = %v, want a PropertyError about %q", tt.value, err, tt.wantErr)
		}
	}
	if got, err := (Properties{}).Int64("absent", def); err != nil || got != def {
		t.Errorf("absent: %d, %v", got, err)
	}
}

func TestInt(t *testing.T) {
	p := Properties{"n": " 12 ", "bad": "x"}
	if got, err := p.Int("n", 0); err != nil || got != 12 {
		t.Errorf("Int = %d, %v", got, err)
	}
	if got, err := p.Int("absent", 5); err != nil || got != 5 {
		t.Errorf("Int absent = %d, %v", got, err)
	}
	if _, err := p.Int("bad", 0); err == nil {
		t.Error("Int(bad) succeeded")
	}
}

func TestString(t *testing.T) {
	p := Properties{"s": " as written ", "empty": ""}
	if got := p.String("s", "d"); got != " as written " {
		t.Errorf("String = %q", got)
	}
	if got := p.String("empty", "d"); got != "" {
		t.Errorf("String(empty) = %q, want empty: the key is present", got)
	}
	if got := p.String("absent", "d"); got != "d" {
		t.Errorf("String(absent) = %q", got)
	}
}

func TestLockSettingsDefaults(t *testing.T) {
	got, err := LockSettingsFrom(Properties{"unrelated": "x", PropLockMaxWaitTime: ""})
	if err != nil {
		t.Fatal(err)
	}
	want := LockSettings{
		DefaultLeaseMs: 30000, MaxLeaseMs: 1800000, ScanIntervalMs: 1000, DisconnectGraceMs: 0,
		MaxWaitMs: 1800000, MaxKeyLength: 4096, MaxOwnerLength: 1024, RequestTimeoutMs: 2500,
		NodeGraceMs: 15000, SnapshotEntries: 10000,
		MaxParamsBytes: 4096, MaxConnections: 10000, MaxConnsPerIP: 256, MaxRequestsPerSec: 2000,
		MaxLocks: 2000000, MaxWaitersPerLock: 10000,
	}
	if got != want || DefaultLockSettings() != want {
		t.Fatalf("defaults = %+v / %+v, want %+v", got, DefaultLockSettings(), want)
	}
	if err := want.Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

func TestLockSettingsFrom(t *testing.T) {
	p := Properties{
		PropLockDefaultExpireTime:  "10000",
		PropLockMaxExpireTime:      "60000",
		PropLockExpireScanInterval: "250",
		PropLockDisconnectGrace:    "15000",
		PropLockMaxWaitTime:        "120000",
		PropLockMaxKeyLength:       "512",
		PropLockMaxOwnerLength:     "256",
		PropLockRequestTimeout:     "3000",
		PropLockNodeGrace:          "4000",
	}
	got, err := LockSettingsFrom(p)
	if err != nil {
		t.Fatal(err)
	}
	want := LockSettings{
		DefaultLeaseMs: 10000, MaxLeaseMs: 60000, ScanIntervalMs: 250, DisconnectGraceMs: 15000,
		MaxWaitMs: 120000, MaxKeyLength: 512, MaxOwnerLength: 256, RequestTimeoutMs: 3000,
		NodeGraceMs: 4000, SnapshotEntries: 10000,
		MaxParamsBytes: 4096, MaxConnections: 10000, MaxConnsPerIP: 256, MaxRequestsPerSec: 2000,
		MaxLocks: 2000000, MaxWaitersPerLock: 10000,
	}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestLockSettingsFromFile(t *testing.T) {
	p, err := LoadProperties(filepath.Join("testdata", "nacos-application.properties"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := LockSettingsFrom(p)
	if err != nil {
		t.Fatal(err)
	}
	want := DefaultLockSettings()
	want.DefaultLeaseMs, want.MaxLeaseMs, want.ScanIntervalMs = 20000, 600000, 500
	want.DisconnectGraceMs, want.MaxKeyLength = 3000, 2048
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if port, present, err := ServerPort(p); port != 8848 || !present || err != nil {
		t.Fatalf("ServerPort = %d, %v, %v", port, present, err)
	}
	if ip := IPAddress(p); ip != "10.0.0.7" {
		t.Fatalf("IPAddress = %q", ip)
	}
}

func TestLockSettingsFromInvalid(t *testing.T) {
	tests := []struct {
		name    string
		props   Properties
		wantKey string
		want    string // substring of the message
	}{
		{"zero default lease", Properties{PropLockDefaultExpireTime: "0"}, PropLockDefaultExpireTime, "between 1 and"},
		{"negative max lease", Properties{PropLockMaxExpireTime: "-1"}, PropLockMaxExpireTime, "between 1 and"},
		{"max below default", Properties{PropLockMaxExpireTime: "1000"}, PropLockMaxExpireTime,
			"at least nacos.lock.default_expire_time (30000)"},
		{"default above default max", Properties{PropLockDefaultExpireTime: "1800001"}, PropLockMaxExpireTime,
			"at least nacos.lock.default_expire_time (1800001)"},
		{"zero scan interval", Properties{PropLockExpireScanInterval: "0"}, PropLockExpireScanInterval, "between 1 and"},
		{"negative grace", Properties{PropLockDisconnectGrace: "-5"}, PropLockDisconnectGrace, "between 0 and"},
		{"zero max wait", Properties{PropLockMaxWaitTime: "0"}, PropLockMaxWaitTime, "between 1 and"},
		{"zero key length", Properties{PropLockMaxKeyLength: "0"}, PropLockMaxKeyLength, "between 1 and 60000"},
		{"key length over badger's", Properties{PropLockMaxKeyLength: "70000"}, PropLockMaxKeyLength, "between 1 and 60000"},
		{"zero owner length", Properties{PropLockMaxOwnerLength: "0"}, PropLockMaxOwnerLength, "between 1 and"},
		{"zero request timeout", Properties{PropLockRequestTimeout: "0"}, PropLockRequestTimeout, "between 1 and"},
		{"over 100 years", Properties{PropLockMaxExpireTime: "3153600000001"}, PropLockMaxExpireTime, "between 1 and 3153600000000"},
		{"not a number", Properties{PropLockRequestTimeout: "5s"}, PropLockRequestTimeout, "not an integer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := LockSettingsFrom(tt.props)
			var perr *PropertyError
			if !errors.As(err, &perr) {
				t.Fatalf("err = %v, want a PropertyError", err)
			}
			if perr.Key != tt.wantKey || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), tt.wantKey) {
				t.Fatalf("err = %v (key %s), want key %s and %q", err, perr.Key, tt.wantKey, tt.want)
			}
			if raw, ok := tt.props[perr.Key]; ok && perr.Value != raw {
				t.Fatalf("error value %q, want the value as written %q", perr.Value, raw)
			}
		})
	}
}

func TestLockSettingsFromReportsAll(t *testing.T) {
	_, err := LockSettingsFrom(Properties{PropLockMaxKeyLength: "0", PropLockMaxOwnerLength: "0"})
	if err == nil || !strings.Contains(err.Error(), PropLockMaxKeyLength) || !strings.Contains(err.Error(), PropLockMaxOwnerLength) {
		t.Fatalf("err = %v, want both properties named", err)
	}
	_, err = LockSettingsFrom(Properties{PropLockMaxKeyLength: "x", PropLockRequestTimeout: "y"})
	if err == nil || !strings.Contains(err.Error(), `"x"`) || !strings.Contains(err.Error(), `"y"`) {
		t.Fatalf("err = %v, want both bad values named", err)
	}
}

func TestServerPort(t *testing.T) {
	tests := []struct {
		name        string
		props       Properties
		want        int
		wantPresent bool
		wantErrKey  string
	}{
		{"absent", Properties{}, 8848, false, ""},
		{"empty counts as absent", Properties{PropServerPort: " "}, 8848, false, ""},
		{"Nacos 2.x name", Properties{PropServerPort: "9000"}, 9000, true, ""},
		{"Nacos 3.x name", Properties{PropMainPort: "18848"}, 18848, true, ""},
		{"3.x name wins", Properties{PropMainPort: "18848", PropServerPort: "9000"}, 18848, true, ""},
		{"empty 3.x name falls back", Properties{PropMainPort: "", PropServerPort: "9000"}, 9000, true, ""},
		{"zero", Properties{PropServerPort: "0"}, 0, true, PropServerPort},
		{"too big", Properties{PropMainPort: "65536"}, 0, true, PropMainPort},
		{"not a number", Properties{PropServerPort: "http"}, 0, true, PropServerPort},
		{"bad 3.x value is not skipped", Properties{PropMainPort: "x", PropServerPort: "9000"}, 0, true, PropMainPort},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, present, err := ServerPort(tt.props)
			if tt.wantErrKey != "" {
				var perr *PropertyError
				if !errors.As(err, &perr) || perr.Key != tt.wantErrKey {
					t.Fatalf("err = %v, want a PropertyError for %s", err, tt.wantErrKey)
				}
				return
			}
			if err != nil || got != tt.want || present != tt.wantPresent {
				t.Fatalf("ServerPort = %d, %v, %v; want %d, %v", got, present, err, tt.want, tt.wantPresent)
			}
		})
	}
}

func TestIPAddress(t *testing.T) {
	tests := []struct {
		props Properties
		want  string
	}{
		{Properties{}, "127.0.0.1"},
		{Properties{PropIPAddress: ""}, "127.0.0.1"},
		{Properties{PropIPAddress: " 10.1.2.3 "}, "10.1.2.3"},
		{Properties{PropIPAddress: "fd00::1"}, "fd00::1"},
	}
	for _, tt := range tests {
		if got := IPAddress(tt.props); got != tt.want {
			t.Errorf("IPAddress(%q) = %q, want %q", tt.props, got, tt.want)
		}
	}
}
