package gateway

import (
	"strings"
	"testing"
	"time"

	"nacos-lockd/settings"
)

// The gateway's defaults for its tagged fields are the declared ones.
func TestConfigDefaultsAreDeclared(t *testing.T) {
	c := Config{}.withDefaults()
	if c.DefaultLease != 30*time.Second || c.MaxLease != 30*time.Minute || c.RequestTimeout != 2500*time.Millisecond ||
		c.MaxLocks != 2_000_000 || c.MaxWaitersPerLock != 10_000 || c.RequestsPerSecond != 2000 || c.NodeGrace != 15*time.Second ||
		c.DisconnectGrace != 0 || c.MaxParamsBytes != 4096 {
		t.Fatalf("defaults %+v", c)
	}
	n := 0
	for _, f := range settings.Fields(&c) {
		n++
		if f.Int() != f.Setting.DefaultInt() {
			t.Errorf("%s: default %d, declared %d", f.Name, f.Int(), f.Setting.DefaultInt())
		}
	}
	if n != 15 {
		t.Errorf("%d fields bound to settings, want 15", n)
	}
}

func TestConfigValidate(t *testing.T) {
	if err := (Config{ListenAddr: ":0"}).Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	err := Config{ListenAddr: ":0", MaxLease: -time.Second, MaxKeyLength: 70_000, RequestsPerSecond: 0.5}.Validate()
	for _, want := range []string{
		"gateway: MaxLease (nacos.lock.max_expire_time) -1s: must be between 1 and",
		"MaxKeyLength (nacos.lock.max_key_length) 70000: must be between 1 and 60000",
		"RequestsPerSecond (nacos.lock.max_requests_per_second) 0.5",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("err = %v, want %q", err, want)
		}
	}
	if err := (Config{}).Validate(); err == nil || !strings.Contains(err.Error(), "listen address") {
		t.Errorf("no listen address: %v", err)
	}
}
