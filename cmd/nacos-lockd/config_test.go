package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseConfig(t *testing.T) {
	dir := t.TempDir()
	props := filepath.Join(dir, "application.properties")
	if err := os.WriteFile(props, []byte("server.port=9000\nnacos.lock.default_expire_time=5000\nnacos.inetutils.ip-address=10.1.2.3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Run("defaults", func(t *testing.T) {
		cfg, err := parseConfig(nil, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.port != 8848 || cfg.dataDir != "./data" || cfg.ip != "127.0.0.1" || cfg.lock.DefaultLeaseMs != 30000 {
			t.Fatalf("%+v", cfg)
		}
	})
	t.Run("the file sets what flags do not", func(t *testing.T) {
		cfg, err := parseConfig([]string{"--config", props}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.port != 9000 || cfg.ip != "10.1.2.3" || cfg.lock.DefaultLeaseMs != 5000 {
			t.Fatalf("%+v", cfg)
		}
	})
	t.Run("flags override the file", func(t *testing.T) {
		cfg, err := parseConfig([]string{"--config", props, "--port", "8848", "--ip", "127.0.0.1"}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.port != 8848 || cfg.ip != "127.0.0.1" {
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
		{[]string{"--ip", "not-an-ip"}, "not an IP address"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--log-format", "xml"}, "--log-format"},
		{[]string{"extra"}, "unexpected arguments"},
	} {
		_, err := parseConfig(tt.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: got %v, want an error mentioning %q", tt.args, err, tt.want)
		}
	}
	bad := filepath.Join(dir, "bad.properties")
	if err := os.WriteFile(bad, []byte("nacos.lock.default_expire_time=soon\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := parseConfig([]string{"--config", bad}, io.Discard); err == nil || !strings.Contains(err.Error(), "nacos.lock.default_expire_time") {
		t.Fatalf("bad property: %v", err)
	}
}
