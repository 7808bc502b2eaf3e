package main

import (
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"nacos-lockd/bench/peers"
	"nacos-lockd/gateway"
	"nacos-lockd/settings"
)

// gatewayConfigFrom is the gateway config that serve would hand over for
// a properties file holding text.
func gatewayConfigFrom(t *testing.T, text string) gateway.Config {
	t.Helper()
	props := filepath.Join(t.TempDir(), "application.properties")
	if err := os.WriteFile(props, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseConfig([]string{"--config", props}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var gw gateway.Config
	settings.Copy(&gw, &cfg.lock)
	return gw
}

// The lock properties reach the gateway's config through their tags, units
// converted, as serve hands them over.
func TestLockSettingsReachGateway(t *testing.T) {
	gw := gatewayConfigFrom(t, "nacos.lock.default_expire_time=5000\nnacos.lock.max_locks=3\nnacos.lock.max_waiters_per_lock=4\n"+
		"nacos.lock.max_requests_per_second=7\nnacos.lock.node_grace_ms=1500\nnacos.lock.disconnect_grace_ms=250\n")
	if gw.DefaultLease != 5*time.Second || gw.MaxLocks != 3 || gw.MaxWaitersPerLock != 4 || gw.RequestsPerSecond != 7 ||
		gw.NodeGrace != 1500*time.Millisecond || gw.DisconnectGrace != 250*time.Millisecond ||
		gw.MaxLease != 30*time.Minute || gw.MaxKeyLength != 4096 || gw.MaxConnectionsPerIP != 256 {
		t.Fatalf("gateway config %+v", gw)
	}
}

// The properties every benchmarked nacos-lockd runs with parse, and lift
// the per-connection request limit that would otherwise cap one
// connection's W1 at 1000 pairs/s.
func TestBenchPropertiesLiftTheRequestLimit(t *testing.T) {
	gw := gatewayConfigFrom(t, peers.BenchProperties())
	if want := float64(settings.LockMaxRequestsPerSecond.Max); gw.RequestsPerSecond != want {
		t.Fatalf("requests per second %g, want %g", gw.RequestsPerSecond, want)
	}
}
