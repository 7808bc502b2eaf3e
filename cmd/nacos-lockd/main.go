// Command nacos-lockd is a distributed lock server that unmodified Nacos
// Java clients use as their lock service.
//
//	nacos-lockd --port 8848 --data-dir ./data [--config application.properties]
//
// --port is the Nacos main port: the SDK gRPC port is port+1000 and the
// Raft port port-1000, as in Nacos.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/compat"
	"nacos-lockd/gateway"
	"nacos-lockd/statemachine"
	"nacos-lockd/storage"
)

// Port offsets from the main port, fixed by the Nacos client and cluster
// conventions.
const (
	grpcOffset = 1000
	raftOffset = -1000
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "nacos-lockd:", err)
		os.Exit(1)
	}
}

// config is everything run needs, after flags override the properties file.
type config struct {
	port      int
	ip        string
	dataDir   string
	logLevel  zerolog.Level
	logFormat string
	lock      compat.LockSettings
}

var errHelp = errors.New("help requested")

func parseConfig(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("nacos-lockd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	port := fs.Int("port", compat.DefaultServerPort, "main port (Nacos server.port); SDK gRPC listens on port+1000, Raft on port-1000")
	dataDir := fs.String("data-dir", "./data", "directory for the lock table and the Raft log")
	configFile := fs.String("config", "", "Nacos-style properties file (application.properties)")
	ip := fs.String("ip", "", "this node's address (nacos.inetutils.ip-address); default 127.0.0.1")
	logLevel := fs.String("log-level", "info", "log level: trace, debug, info, warn, error")
	logFormat := fs.String("log-format", "json", "log format: json or console")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return config{}, errHelp
		}
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })

	props := compat.Properties{}
	if *configFile != "" {
		p, err := compat.LoadProperties(*configFile)
		if err != nil {
			return config{}, fmt.Errorf("read config: %w", err)
		}
		props = p
	}
	cfg := config{dataDir: *dataDir, logFormat: *logFormat}
	var err error
	if cfg.lock, err = compat.LockSettingsFrom(props); err != nil {
		return config{}, fmt.Errorf("config %s: %w", *configFile, err)
	}
	cfg.port = *port
	if p, present, err := compat.ServerPort(props); err != nil {
		return config{}, fmt.Errorf("config %s: %w", *configFile, err)
	} else if present && !set["port"] {
		cfg.port = p
	}
	if cfg.port+raftOffset < 1 || cfg.port+grpcOffset > 65535 {
		return config{}, fmt.Errorf("--port %d: port-1000 and port+1000 must both be valid ports (1001..64535)", cfg.port)
	}
	cfg.ip = compat.IPAddress(props)
	if set["ip"] {
		cfg.ip = *ip
	}
	if net.ParseIP(cfg.ip) == nil {
		return config{}, fmt.Errorf("node address %q is not an IP address", cfg.ip)
	}
	if cfg.logLevel, err = zerolog.ParseLevel(*logLevel); err != nil || *logLevel == "" {
		return config{}, fmt.Errorf("--log-level %q: want trace, debug, info, warn or error", *logLevel)
	}
	if cfg.logFormat != "json" && cfg.logFormat != "console" {
		return config{}, fmt.Errorf("--log-format %q: want json or console", cfg.logFormat)
	}
	return cfg, nil
}

func newLogger(cfg config, w io.Writer) zerolog.Logger {
	if cfg.logFormat == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339Nano}
	}
	return zerolog.New(w).Level(cfg.logLevel).With().Timestamp().Logger()
}

func run(ctx context.Context, args []string, stderr io.Writer) error {
	cfg, err := parseConfig(args, stderr)
	if errors.Is(err, errHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	grpcAddr := net.JoinHostPort("", strconv.Itoa(cfg.port+grpcOffset))
	raftAddr := net.JoinHostPort(cfg.ip, strconv.Itoa(cfg.port+raftOffset))
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	log.Info().Int("main_port", cfg.port).Str("grpc", grpcAddr).Str("raft", raftAddr).Str("data_dir", cfg.dataDir).
		Int64("default_lease_ms", cfg.lock.DefaultLeaseMs).Int64("max_lease_ms", cfg.lock.MaxLeaseMs).
		Int64("disconnect_grace_ms", cfg.lock.DisconnectGraceMs).Msg("nacos-lockd starting")

	if err := os.MkdirAll(cfg.dataDir, 0o750); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	db, err := storage.Open(storage.Config{
		Dir:    filepath.Join(cfg.dataDir, "locks"),
		Logger: log.With().Str("component", "storage").Logger(),
	})
	if err != nil {
		return fmt.Errorf("open storage: %w", err)
	}
	defer func() {
		if err := db.Close(); err != nil {
			log.Error().Err(err).Msg("close storage")
		}
	}()

	gw, err := gateway.New(gateway.Config{
		ListenAddr:      grpcAddr,
		AdvertiseIP:     "",
		MainPort:        cfg.port,
		NodeID:          "1",
		DefaultLease:    ms(cfg.lock.DefaultLeaseMs),
		MaxLease:        ms(cfg.lock.MaxLeaseMs),
		MaxWait:         ms(cfg.lock.MaxWaitMs),
		ScanInterval:    ms(cfg.lock.ScanIntervalMs),
		DisconnectGrace: ms(cfg.lock.DisconnectGraceMs),
		RequestTimeout:  ms(cfg.lock.RequestTimeoutMs),
		MaxKeyLength:    cfg.lock.MaxKeyLength,
		MaxOwnerLength:  cfg.lock.MaxOwnerLength,
	}, log)
	if err != nil {
		return err
	}
	node, err := statemachine.Start(statemachine.RaftConfig{
		NodeHostDir: filepath.Join(cfg.dataDir, "raft"),
		RaftAddress: raftAddr,
	}, db, gw.Notify, log)
	if err != nil {
		return err
	}
	defer node.Close() // after the gateway has drained, before storage closes

	readyCtx, cancel := context.WithTimeout(ctx, time.Minute)
	err = node.WaitReady(readyCtx)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		return err
	}
	lis, err := net.Listen("tcp", grpcAddr)
	if err != nil {
		return fmt.Errorf("listen for clients: %w", err)
	}
	st, _ := node.Stats()
	log.Info().Int("main_port", cfg.port).Int("grpc_port", cfg.port+grpcOffset).Int("raft_port", cfg.port+raftOffset).
		Int("locks", st.Locks).Uint64("applied", st.Applied).Msg("nacos-lockd ready")
	log.Warn().Msg("clients are not authenticated: keep the SDK port on a trusted network")
	if err := gw.Serve(ctx, lis, node); err != nil {
		return err
	}
	log.Info().Msg("nacos-lockd stopped")
	return nil
}
