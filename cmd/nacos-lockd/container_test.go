package main

import (
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// containerConfigFor runs the container entrypoint's mapping and then the
// server's own configuration parsing on it, as runContainer does, with the
// image's mounted files given by mounted.
func containerConfigFor(t *testing.T, env map[string]string, mounted map[string]string, ips ...string) (config, error) {
	t.Helper()
	dir := t.TempDir()
	readFile := func(p string) ([]byte, bool) { c, ok := mounted[p]; return []byte(c), ok }
	s, err := containerSettings(func(k string) string { return env[k] }, readFile, func() []string { return ips })
	if err != nil {
		return config{}, err
	}
	getenv := func(k string) string {
		if v := env[k]; v != "" {
			return v
		}
		return s.env[k]
	}
	// The image's paths, redirected into the test's directory.
	for k, v := range s.env {
		if content, ok := mounted[v]; ok {
			p := filepath.Join(dir, filepath.Base(v))
			if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
				t.Fatal(err)
			}
			s.env[k] = p
		}
	}
	if s.clusterConf != nil {
		p := filepath.Join(dir, fromEnvClusterConf)
		if want := filepath.Join(getenv("NACOS_LOCKD_DATA_DIR"), fromEnvClusterConf); s.env["NACOS_LOCKD_CLUSTER_CONF"] != want {
			t.Fatalf("NACOS_SERVERS written to %q, want %q", s.env["NACOS_LOCKD_CLUSTER_CONF"], want)
		}
		if err := os.WriteFile(p, s.clusterConf, 0o600); err != nil {
			t.Fatal(err)
		}
		s.env["NACOS_LOCKD_CLUSTER_CONF"] = p
	}
	return parseConfigWith(nil, getenv, s.overlay, io.Discard)
}

func TestContainerSettings(t *testing.T) {
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	t.Run("nothing set: a single node on /data", func(t *testing.T) {
		cfg, err := containerConfigFor(t, nil, nil)
		if err != nil || cfg.dataDir != "/data" || cfg.cluster || cfg.self.Port != 8848 || cfg.self.Host != "127.0.0.1" {
			t.Fatalf("%v %+v", err, cfg)
		}
	})
	t.Run("mounted application.properties", func(t *testing.T) {
		cfg, err := containerConfigFor(t, nil, map[string]string{containerConfig: "server.port=8850\nnacos.lock.default_expire_time=7000\n"})
		if err != nil || cfg.self.Port != 8850 || cfg.lock.DefaultLeaseMs != 7000 {
			t.Fatalf("%v %+v", err, cfg)
		}
	})
	t.Run("NACOS_SERVER_PORT over the file, NACOS_LOCKD_PORT over both", func(t *testing.T) {
		props := map[string]string{containerConfig: "server.port=8850\n"}
		cfg, err := containerConfigFor(t, map[string]string{"NACOS_SERVER_PORT": "8860"}, props)
		if err != nil || cfg.self.Port != 8860 {
			t.Fatalf("%v %+v", err, cfg.self)
		}
		cfg, err = containerConfigFor(t, map[string]string{"NACOS_SERVER_PORT": "8860", "NACOS_LOCKD_PORT": "8870"}, props)
		if err != nil || cfg.self.Port != 8870 {
			t.Fatalf("%v %+v", err, cfg.self)
		}
	})
	t.Run("NACOS_SERVERS makes a cluster and finds this node by its address", func(t *testing.T) {
		cfg, err := containerConfigFor(t, map[string]string{"NACOS_SERVERS": "10.0.0.1:8848 10.0.0.2:8848,10.0.0.3:8848", "NACOS_LOCKD_DATA_DIR": t.TempDir()},
			nil, "172.17.0.5", "10.0.0.2")
		if err != nil || !cfg.cluster || len(cfg.members) != 3 || cfg.self.Address() != "10.0.0.2:8848" {
			t.Fatalf("%v %+v", err, cfg)
		}
	})
	t.Run("NACOS_SERVER_IP names this node", func(t *testing.T) {
		cfg, err := containerConfigFor(t, map[string]string{"MODE": "cluster", "NACOS_SERVERS": "10.0.0.1:8848 10.0.0.2:8848 10.0.0.3:8848",
			"NACOS_SERVER_IP": "10.0.0.3", "NACOS_LOCKD_DATA_DIR": t.TempDir()}, nil, "10.0.0.2")
		if err != nil || cfg.self.Address() != "10.0.0.3:8848" {
			t.Fatalf("%v %+v", err, cfg.self)
		}
	})
	t.Run("a mounted cluster.conf", func(t *testing.T) {
		cfg, err := containerConfigFor(t, nil, map[string]string{containerClusterConf: "10.0.0.1:8848\n10.0.0.2:8848\n10.0.0.3:8848\n"}, "10.0.0.1")
		if err != nil || !cfg.cluster || cfg.self.Address() != "10.0.0.1:8848" {
			t.Fatalf("%v %+v", err, cfg)
		}
	})
	t.Run("MODE=standalone ignores the members", func(t *testing.T) {
		cfg, err := containerConfigFor(t, map[string]string{"MODE": "standalone", "NACOS_SERVERS": "10.0.0.1:8848 10.0.0.2:8848"},
			map[string]string{containerClusterConf: "10.0.0.1:8848\n"}, "10.0.0.1")
		if err != nil || cfg.cluster {
			t.Fatalf("%v %+v", err, cfg)
		}
	})
	t.Run("members by name, as nacos-k8s writes them: found by the pod's host name", func(t *testing.T) {
		withHost(t, hostEnv{hostname: func() (string, error) { return "nacos-lockd-1", nil }})
		const ns = ".nacos-lockd-headless.prod.svc.cluster.local:8848"
		cfg, err := containerConfigFor(t, map[string]string{"MODE": "cluster", "PREFER_HOST_MODE": "hostname",
			"NACOS_SERVERS": "nacos-lockd-0" + ns + " nacos-lockd-1" + ns + " nacos-lockd-2" + ns}, nil, "10.244.1.7")
		if err != nil || !cfg.cluster || len(cfg.members) != 3 || cfg.self.Address() != "nacos-lockd-1"+ns {
			t.Fatalf("%v %+v", err, cfg)
		}
	})
	t.Run("NACOS_LOCKD_JOIN_FROM_ORDINAL: pods added by scaling up join", func(t *testing.T) {
		for host, want := range map[string]bool{"nacos-lockd-0": false, "nacos-lockd-2": false, "nacos-lockd-3": true, "nacos-lockd-12": true} {
			withHost(t, hostEnv{hostname: func() (string, error) { return host, nil }})
			s, err := containerSettings(func(k string) string {
				return map[string]string{"NACOS_LOCKD_JOIN_FROM_ORDINAL": "3"}[k]
			}, func(string) ([]byte, bool) { return nil, false }, func() []string { return nil })
			if err != nil || s.join != want {
				t.Errorf("%s: join %v (%v), want %v", host, s.join, err, want)
			}
		}
		for _, c := range [][2]string{{"3", "lockd"}, {"3", "lockd-x"}, {"three", "lockd-3"}, {"-1", "lockd-3"}} {
			withHost(t, hostEnv{hostname: func() (string, error) { return c[1], nil }})
			_, err := containerSettings(func(k string) string {
				return map[string]string{"NACOS_LOCKD_JOIN_FROM_ORDINAL": c[0]}[k]
			}, func(string) ([]byte, bool) { return nil, false }, func() []string { return nil })
			if err == nil || !strings.Contains(err.Error(), "NACOS_LOCKD_JOIN_FROM_ORDINAL") {
				t.Errorf("from %s on %s: %v, want an error naming the variable", c[0], c[1], err)
			}
		}
	})
	t.Run("auth from NACOS_AUTH_*, over the file", func(t *testing.T) {
		cfg, err := containerConfigFor(t, map[string]string{"NACOS_AUTH_ENABLE": "true", "NACOS_AUTH_TOKEN": key, "NACOS_AUTH_TOKEN_EXPIRE_SECONDS": "600",
			"NACOS_AUTH_IDENTITY_KEY": "serverIdentity", "NACOS_AUTH_IDENTITY_VALUE": "s3cret"},
			map[string]string{containerConfig: "nacos.core.auth.enabled=false\n"})
		if err != nil || !cfg.auth.Enabled || cfg.auth.ExpireSeconds != 600 || cfg.identity != [2]string{"serverIdentity", "s3cret"} {
			t.Fatalf("%v %+v %v", err, cfg.auth, cfg.identity)
		}
	})
	for name, c := range map[string]struct {
		env  map[string]string
		ips  []string
		want string
	}{
		"MODE=cluster without members": {map[string]string{"MODE": "cluster"}, nil, "MODE=cluster needs NACOS_SERVERS"},
		"an unknown MODE":              {map[string]string{"MODE": "replicated"}, nil, `MODE="replicated": want standalone or cluster`},
		"this node not listed":         {map[string]string{"NACOS_SERVERS": "10.0.0.1:8848 10.0.0.2:8848"}, []string{"172.17.0.5"}, "set NACOS_SERVER_IP"},
		"a bad member":                 {map[string]string{"NACOS_SERVERS": "10.0.0.1:port"}, nil, "NACOS_SERVERS="},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := containerConfigFor(t, c.env, nil, c.ips...)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}
