package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"nacos-lockd/replica"
)

func noEnv(string) string { return "" }

// oneEnv is an environment holding only k=v.
func oneEnv(k, v string) func(string) string {
	return func(key string) string {
		if key == k {
			return v
		}
		return ""
	}
}

func TestParseConfig(t *testing.T) {
	dir := t.TempDir()
	props := filepath.Join(dir, "application.properties")
	if err := os.WriteFile(props, []byte("server.port=9000\nnacos.lock.default_expire_time=5000\nnacos.inetutils.ip-address=10.1.2.3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("defaults", func(t *testing.T) {
		cfg, err := parseConfig(nil, noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.self.Port != 8848 || cfg.dataDir != "./data" || cfg.self.Host != "127.0.0.1" || cfg.lock.DefaultLeaseMs != 30000 || cfg.cluster {
			t.Fatalf("%+v", cfg)
		}
		if cfg.coalesceWindow != replica.DefaultCoalesceWindow {
			t.Fatalf("coalesce window %s", cfg.coalesceWindow)
		}
		if cfg.timerSlack != 2*time.Millisecond {
			t.Fatalf("timer slack %s, want 2ms", cfg.timerSlack)
		}
	})
	t.Run("timer slack from the environment", func(t *testing.T) {
		cfg, err := parseConfig(nil, oneEnv("NACOS_LOCKD_TIMER_SLACK", "0s"), io.Discard)
		if err != nil || cfg.timerSlack != 0 {
			t.Fatalf("timer slack %s, %v; want 0 (as started)", cfg.timerSlack, err)
		}
	})
	t.Run("coalescing can be turned off", func(t *testing.T) {
		cfg, err := parseConfig(nil, oneEnv("NACOS_LOCKD_COALESCE_WINDOW", "0s"), io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.coalesceWindow != 0 { // 0 is off: server.TestCoalesceWindowOff
			t.Fatalf("coalesce window %s, want 0 (off)", cfg.coalesceWindow)
		}
	})
	t.Run("profiling is off unless asked for", func(t *testing.T) {
		if cfg, err := parseConfig(nil, noEnv, io.Discard); err != nil || cfg.profiling {
			t.Fatalf("default: profiling %v, %v", cfg.profiling, err)
		}
		if cfg, err := parseConfig([]string{"--pprof"}, noEnv, io.Discard); err != nil || !cfg.profiling {
			t.Fatalf("--pprof: profiling %v, %v", cfg.profiling, err)
		}
		env := oneEnv("NACOS_LOCKD_PPROF", "true")
		if cfg, err := parseConfig(nil, env, io.Discard); err != nil || !cfg.profiling {
			t.Fatalf("NACOS_LOCKD_PPROF=true: profiling %v, %v", cfg.profiling, err)
		}
	})
	t.Run("the file sets what flags do not", func(t *testing.T) {
		cfg, err := parseConfig([]string{"--config", props}, noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.self.Port != 9000 || cfg.self.Host != "10.1.2.3" || cfg.self.RaftPort != 8000 || cfg.lock.DefaultLeaseMs != 5000 {
			t.Fatalf("%+v", cfg)
		}
	})
	t.Run("flags override the file", func(t *testing.T) {
		cfg, err := parseConfig([]string{"--config", props, "--port", "8848", "--ip", "127.0.0.1"}, noEnv, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.self.Port != 8848 || cfg.self.Host != "127.0.0.1" {
			t.Fatalf("%+v", cfg)
		}
	})
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--port", "500"}, "--port 500"},
		{[]string{"--port", "65000"}, "--port 65000"},
		{[]string{"--config", filepath.Join(dir, "missing")}, "read config"},
		{[]string{"--ip", "not_an_ip"}, "neither an IP address nor a DNS name"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--log-format", "xml"}, "--log-format"},
		{[]string{"extra"}, "unexpected arguments"},
		{[]string{"--coalesce-window", "-1ms"}, "--coalesce-window"},
		{[]string{"--coalesce-window", "5s"}, "--coalesce-window"},
		{[]string{"--timer-slack", "-1us"}, "--timer-slack"},
		{[]string{"--timer-slack", "11ms"}, "--timer-slack"},
	} {
		_, err := parseConfig(tt.args, noEnv, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: got %v, want an error mentioning %q", tt.args, err, tt.want)
		}
	}
	bad := filepath.Join(dir, "bad.properties")
	if err := os.WriteFile(bad, []byte("nacos.lock.default_expire_time=soon\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := parseConfig([]string{"--config", bad}, noEnv, io.Discard); err == nil || !strings.Contains(err.Error(), "nacos.lock.default_expire_time") {
		t.Fatalf("bad property: %v", err)
	}
}

func TestParseConfigCluster(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "cluster.conf")
	if err := os.WriteFile(conf, []byte("# three nodes\n127.0.0.1:8848\n127.0.0.1:8850\n127.0.0.1:8852\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := parseConfig([]string{"--cluster-conf", conf, "--port", "8850"}, noEnv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.cluster || len(cfg.members) != 3 || cfg.self.Address() != "127.0.0.1:8850" {
		t.Fatalf("%+v", cfg)
	}
	_, err = parseConfig([]string{"--cluster-conf", conf, "--port", "8854"}, noEnv, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:8854) is not listed") || !strings.Contains(err.Error(), conf) {
		t.Fatalf("node not in cluster.conf: %v", err)
	}
	if _, err := parseConfig([]string{"--join"}, noEnv, io.Discard); err == nil {
		t.Fatal("--join without a cluster.conf accepted")
	}
	// Environment variables fill in for flags, and flags win.
	env := map[string]string{"NACOS_LOCKD_CLUSTER_CONF": conf, "NACOS_LOCKD_PORT": "8852", "NACOS_LOCKD_DATA_DIR": "/srv/locks"}
	cfg, err = parseConfig([]string{"--port", "8848"}, func(k string) string { return env[k] }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.self.Port != 8848 || cfg.dataDir != "/srv/locks" || !cfg.cluster {
		t.Fatalf("%+v", cfg)
	}
	env["NACOS_LOCKD_PORT"] = "lots"
	if _, err := parseConfig(nil, func(k string) string { return env[k] }, io.Discard); err == nil || !strings.Contains(err.Error(), "NACOS_LOCKD_PORT") {
		t.Fatalf("bad env: %v", err)
	}
}
