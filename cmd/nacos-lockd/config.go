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
	"nacos-lockd/settings"
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
	// coalesceWindow is replica.RaftConfig.CoalesceWindow: how long
	// renews are collected into one Raft entry; 0 = off.
	coalesceWindow time.Duration
	transport      string        // the SDK port's gRPC server (gateway.Config.Transport)
	raftLog        string        // the Raft log a new data dir keeps (replica.RaftConfig.RaftLog)
	raftEngine     string        // the engine a new single-node data dir gets (replica.ChooseEngine)
	profiling      bool          // /debug/pprof/ on the main port (admin.Config.Profiling)
	timerSlack     time.Duration // every thread's, set at start-up (internal/timerslack); 0 = as started
}

var (
	errHelp    = errors.New("help requested")
	errVersion = errors.New("version requested")
	// errNoTestHooks: --test-hooks given to a release build.
	errNoTestHooks = errors.New("--test-hooks: built without test hooks (they are for the chaos suite: go build -tags testhooks)")
)

func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	return parseConfigWith(args, getenv, nil, stderr)
}

// parseConfigWith is parseConfig with properties that override the
// properties file (the container entrypoint's mapping of Nacos image
// environment variables such as NACOS_AUTH_ENABLE).
func parseConfigWith(args []string, getenv func(string) string, overlay compat.Properties, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("nacos-lockd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	flags := settings.RegisterFlags(fs) // every declared flag, settings/table.go
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: nacos-lockd [flags]\n\nEvery flag can also be set with the environment variable in brackets.\n\n")
		fs.VisitAll(func(f *flag.Flag) {
			if f.Name == "test-hooks" && !testHooksBuilt {
				return // not for users: a release build only refuses it
			}
			env := ""
			if e := settings.EnvOf(f.Name); e != "" {
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
	if flags.Bool(settings.ShowVersion) {
		return config{}, errVersion
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	// Environment variables fill what flags left unset.
	if err := flags.FromEnv(getenv); err != nil {
		return config{}, err
	}
	if flags.String(settings.TestHooks) != "" && !testHooksBuilt {
		return config{}, errNoTestHooks
	}
	configFile := flags.String(settings.ConfigFile)
	clusterConf := flags.String(settings.ClusterConf)
	logLevel := flags.String(settings.LogLevel)

	props := compat.Properties{}
	if configFile != "" {
		p, err := compat.LoadProperties(configFile)
		if err != nil {
			return config{}, fmt.Errorf("read config: %w", err)
		}
		props = p
	}
	for k, v := range overlay {
		props[k] = v
	}
	cfg := config{dataDir: flags.String(settings.DataDir), logFormat: flags.String(settings.LogFormat),
		join: flags.Bool(settings.Join), importNacos: flags.String(settings.ImportNacos),
		testHooks: flags.String(settings.TestHooks), coalesceWindow: flags.Duration(settings.CoalesceWindow),
		transport: flags.String(settings.Transport), raftLog: flags.String(settings.RaftLog), raftEngine: flags.String(settings.RaftEngine), profiling: flags.Bool(settings.Profiling),
		timerSlack: flags.Duration(settings.TimerSlack)}
	if !settings.Transport.CheckChoice(cfg.transport) {
		return config{}, fmt.Errorf("--transport %q: want %s", cfg.transport, settings.Transport.ChoiceList())
	}
	if !settings.RaftLog.CheckChoice(cfg.raftLog) {
		return config{}, fmt.Errorf("--raft-log %q: want %s", cfg.raftLog, settings.RaftLog.ChoiceList())
	}
	if !settings.RaftEngine.CheckChoice(cfg.raftEngine) {
		return config{}, fmt.Errorf("--raft-engine %q: want %s", cfg.raftEngine, settings.RaftEngine.ChoiceList())
	}
	if settings.CoalesceWindow.CheckInt(int64(cfg.coalesceWindow)) != "" {
		return config{}, fmt.Errorf("--coalesce-window %s: want 0 (off) up to %s", cfg.coalesceWindow, time.Duration(settings.CoalesceWindow.Max))
	}
	if settings.TimerSlack.CheckInt(int64(cfg.timerSlack)) != "" {
		return config{}, fmt.Errorf("--timer-slack %s: want 0 (as started) up to %s", cfg.timerSlack, time.Duration(settings.TimerSlack.Max))
	}
	var err error
	if cfg.lock, err = compat.LockSettingsFrom(props); err != nil {
		return config{}, fmt.Errorf("config %s: %w", configFile, err)
	}
	if cfg.auth, err = compat.AuthSettingsFrom(props); err != nil {
		return config{}, fmt.Errorf("config %s: %w", configFile, err)
	}
	if cfg.tls, err = compat.TLSSettingsFrom(props); err != nil {
		return config{}, fmt.Errorf("config %s: %w", configFile, err)
	}
	cfg.identity = [2]string{props.String(compat.PropServerIdentityKey, ""), props.String(compat.PropServerIdentityValue, "")}
	// The port and the address: a flag (or its environment variable)
	// wins over the properties file, which wins over the default.
	mainPort := flags.Int(settings.MainPort)
	if p, present, err := compat.ServerPort(props); err != nil {
		return config{}, fmt.Errorf("config %s: %w", configFile, err)
	} else if present && !flags.IsSet(settings.MainPort) {
		mainPort = p
	}
	// The Raft port is port-1000 and the SDK port port+1000.
	if lo, hi := int(settings.MainPort.Min)+1000, int(settings.MainPort.Max)-1000; mainPort < lo || mainPort > hi {
		return config{}, fmt.Errorf("--port %d: port-1000 and port+1000 must both be valid ports (%d..%d)", mainPort, lo, hi)
	}
	addr := compat.IPAddress(props)
	ipSet := flags.IsSet(settings.IPAddress) || addr != compat.DefaultIPAddress
	if flags.IsSet(settings.IPAddress) {
		addr = flags.String(settings.IPAddress)
	}
	if net.ParseIP(addr) == nil {
		if !compat.IsHostName(addr) {
			return config{}, fmt.Errorf("node address %q is neither an IP address nor a DNS name", addr)
		}
		addr = strings.ToLower(addr)
	}
	cfg.self = compat.Member{Host: addr, Port: mainPort, RaftPort: mainPort - 1000}
	cfg.members = []compat.Member{cfg.self}
	if clusterConf != "" {
		members, err := compat.LoadClusterConf(clusterConf)
		if err != nil {
			return config{}, err
		}
		self, err := findSelf(members, addr, ipSet, mainPort, sysHost)
		if err != nil {
			return config{}, fmt.Errorf("%s: %w", clusterConf, err)
		}
		cfg.self, cfg.members, cfg.cluster = self, members, true
	} else if cfg.join {
		return config{}, errors.New("--join needs --cluster-conf")
	}
	if cfg.importNacos != "" && (len(cfg.members) > 1 || cfg.join) {
		// Each node would import at its own time and build its own table.
		return config{}, errors.New("--import-nacos works on one node: import on a single-member cluster.conf (or no cluster.conf), then let the other nodes --join")
	}
	// zerolog decides which levels it takes; the message names the usual ones.
	if cfg.logLevel, err = zerolog.ParseLevel(logLevel); err != nil || logLevel == "" {
		return config{}, fmt.Errorf("--log-level %q: want %s", logLevel, settings.LogLevel.ChoiceList())
	}
	if !settings.LogFormat.CheckChoice(cfg.logFormat) {
		return config{}, fmt.Errorf("--log-format %q: want %s", cfg.logFormat, settings.LogFormat.ChoiceList())
	}
	return cfg, nil
}
