package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/compat"
	"nacos-lockd/statemachine"
)

// config is everything serve needs. Precedence, highest first: flags,
// NACOS_LOCKD_* environment variables, the properties file, defaults.
type config struct {
	self        compat.Member   // this node
	members     []compat.Member // cluster.conf, or just self
	cluster     bool            // started with a cluster.conf
	join        bool            // join an existing cluster as a new member
	dataDir     string
	logLevel    zerolog.Level
	logFormat   string
	lock        compat.LockSettings
	auth        compat.AuthSettings
	tls         compat.TLSSettings
	identity    [2]string // nacos.core.auth.server.identity.key/value: lets nodes join a cluster with auth on
	importNacos string    // a Nacos lock snapshot to import into an empty data dir first
	testHooks   string    // TEST ONLY: the chaos suite's fault control file (testhooks.go, -tags testhooks)
	// coalesceWindow is statemachine.RaftConfig.CoalesceWindow: how long
	// renews are collected into one Raft entry; 0 = off.
	coalesceWindow time.Duration
}

func (c config) mode() string {
	if c.cluster {
		return "cluster"
	}
	return "single-node"
}

// bootstrapReplicaID is the replica id of a node's first start: 1 for a
// single node, and derived from the address for the initial members of a
// cluster, so that every node computes the same ids from cluster.conf.
// Nodes that join later get theirs from the cluster; restarts read it
// from the data dir. The id also ends every connection id the node mints,
// so the leader can tell whose clients a connection belongs to.
func (c config) bootstrapReplicaID() uint64 {
	if !c.cluster {
		return 1
	}
	return c.self.ReplicaID()
}

var (
	errHelp    = errors.New("help requested")
	errVersion = errors.New("version requested")
	// errNoTestHooks: --test-hooks given to a release build.
	errNoTestHooks = errors.New("--test-hooks: built without test hooks (they are for the chaos suite: go build -tags testhooks)")
)

// envNames maps flags to the environment variables that may set them.
var envNames = map[string]string{
	"port":            "NACOS_LOCKD_PORT",
	"data-dir":        "NACOS_LOCKD_DATA_DIR",
	"config":          "NACOS_LOCKD_CONFIG",
	"cluster-conf":    "NACOS_LOCKD_CLUSTER_CONF",
	"ip":              "NACOS_LOCKD_IP",
	"log-level":       "NACOS_LOCKD_LOG_LEVEL",
	"log-format":      "NACOS_LOCKD_LOG_FORMAT",
	"import-nacos":    "NACOS_LOCKD_IMPORT_NACOS",
	"coalesce-window": "NACOS_LOCKD_COALESCE_WINDOW",
}

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	return parseConfigWith(args, getenv, nil, stderr)
}

// parseConfigWith is parseConfig with properties that override the
// properties file (the container entrypoint's mapping of Nacos image
// environment variables such as NACOS_AUTH_ENABLE).
func parseConfigWith(args []string, getenv func(string) string, overlay compat.Properties, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("nacos-lockd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("port", compat.DefaultServerPort, "main port (Nacos server.port): HTTP admin API; SDK gRPC listens on port+1000, Raft on port-1000")
	dataDir := fs.String("data-dir", "./data", "directory for the lock table and the Raft log")
	configFile := fs.String("config", "", "Nacos-style properties file (application.properties)")
	clusterConf := fs.String("cluster-conf", "", "Nacos cluster.conf: one ip:port or name:port (main port) per member; omit for a single node")
	ip := fs.String("ip", "", "this node's address as listed in cluster.conf, an IP or a DNS name (nacos.inetutils.ip-address); default 127.0.0.1, and with cluster.conf members listed by name, the member named by the host name or resolving to an address of this machine")
	join := fs.Bool("join", false, "start as a new member of a running cluster (after `nacos-lockctl cluster add`)")
	logLevel := fs.String("log-level", "info", "log level: trace, debug, info, warn, error")
	logFormat := fs.String("log-format", "json", "log format: json or console")
	testHooks := fs.String("test-hooks", "", "TEST ONLY, never in production: a control file through which the chaos suite injects clock offsets, storage faults and leader transfers")
	coalesce := fs.Duration("coalesce-window", statemachine.DefaultCoalesceWindow, "lock commands that arrive while earlier ones commit share the next Raft entry, and renews that come in quick succession wait up to this long for company (saves CPU per renew; such a renew is answered up to this much later, a renew after a quieter spell and every other command at once); 0 turns batching off: every command its own entry and every claim a Raft entry, which every member must do while nodes older than this build are in the cluster")
	showVersion := fs.Bool("version", false, "print the version, commit and build date, then exit")
	importNacos := fs.String("import-nacos", "", "import a Nacos lock snapshot (snapshot_N dir or nacos_lock.zip) into the empty data dir before starting")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: nacos-lockd [flags]\n\nEvery flag can also be set with the environment variable in brackets.\n\n")
		fs.VisitAll(func(f *flag.Flag) {
			if f.Name == "test-hooks" && !testHooksBuilt {
				return // not for users: a release build only refuses it
			}
			env := ""
			if e, ok := envNames[f.Name]; ok {
				env = " [" + e + "]"
			}
			fmt.Fprintf(stderr, "  --%s%s\n    \t%s (default %q)\n", f.Name, env, f.Usage, f.DefValue)
		})
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return config{}, errHelp
		}
		return config{}, err
	}
	if *showVersion {
		return config{}, errVersion
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if *testHooks != "" && !testHooksBuilt {
		return config{}, errNoTestHooks
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	// Environment variables fill what flags left unset.
	for name, env := range envNames {
		if v := getenv(env); v != "" && !set[name] {
			if err := fs.Set(name, v); err != nil {
				return config{}, fmt.Errorf("%s=%q: %w", env, v, err)
			}
			set[name] = true
		}
	}

	props := compat.Properties{}
	if *configFile != "" {
		p, err := compat.LoadProperties(*configFile)
		if err != nil {
			return config{}, fmt.Errorf("read config: %w", err)
		}
		props = p
	}
	for k, v := range overlay {
		props[k] = v
	}
	cfg := config{dataDir: *dataDir, logFormat: *logFormat, join: *join, importNacos: *importNacos, testHooks: *testHooks,
		coalesceWindow: *coalesce}
	if cfg.coalesceWindow < 0 || cfg.coalesceWindow > time.Second {
		return config{}, fmt.Errorf("--coalesce-window %s: want 0 (off) up to 1s", cfg.coalesceWindow)
	}
	var err error
	if cfg.lock, err = compat.LockSettingsFrom(props); err != nil {
		return config{}, fmt.Errorf("config %s: %w", *configFile, err)
	}
	if cfg.auth, err = compat.AuthSettingsFrom(props); err != nil {
		return config{}, fmt.Errorf("config %s: %w", *configFile, err)
	}
	if cfg.tls, err = compat.TLSSettingsFrom(props); err != nil {
		return config{}, fmt.Errorf("config %s: %w", *configFile, err)
	}
	cfg.identity = [2]string{props.String(compat.PropServerIdentityKey, ""), props.String(compat.PropServerIdentityValue, "")}
	mainPort := *port
	if p, present, err := compat.ServerPort(props); err != nil {
		return config{}, fmt.Errorf("config %s: %w", *configFile, err)
	} else if present && !set["port"] {
		mainPort = p
	}
	if mainPort-1000 < 1 || mainPort+1000 > 65535 {
		return config{}, fmt.Errorf("--port %d: port-1000 and port+1000 must both be valid ports (1001..64535)", mainPort)
	}
	addr := compat.IPAddress(props)
	ipSet := set["ip"] || addr != compat.DefaultIPAddress
	if set["ip"] {
		addr = *ip
	}
	if net.ParseIP(addr) == nil {
		if !compat.IsHostName(addr) {
			return config{}, fmt.Errorf("node address %q is neither an IP address nor a DNS name", addr)
		}
		addr = strings.ToLower(addr)
	}
	cfg.self = compat.Member{Host: addr, Port: mainPort, RaftPort: mainPort - 1000}
	cfg.members = []compat.Member{cfg.self}
	if *clusterConf != "" {
		members, err := compat.LoadClusterConf(*clusterConf)
		if err != nil {
			return config{}, err
		}
		self, err := findSelf(members, addr, ipSet, mainPort, sysHost)
		if err != nil {
			return config{}, fmt.Errorf("%s: %w", *clusterConf, err)
		}
		cfg.self, cfg.members, cfg.cluster = self, members, true
	} else if cfg.join {
		return config{}, errors.New("--join needs --cluster-conf")
	}
	if cfg.importNacos != "" && (len(cfg.members) > 1 || cfg.join) {
		// Each node would import at its own time and build its own table.
		return config{}, errors.New("--import-nacos works on one node: import on a single-member cluster.conf (or no cluster.conf), then let the other nodes --join")
	}
	if cfg.logLevel, err = zerolog.ParseLevel(*logLevel); err != nil || *logLevel == "" {
		return config{}, fmt.Errorf("--log-level %q: want trace, debug, info, warn or error", *logLevel)
	}
	if cfg.logFormat != "json" && cfg.logFormat != "console" {
		return config{}, fmt.Errorf("--log-format %q: want json or console", cfg.logFormat)
	}
	return cfg, nil
}
