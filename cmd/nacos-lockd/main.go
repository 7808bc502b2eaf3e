// Command nacos-lockd is a distributed lock server that unmodified Nacos
// Java clients use as their lock service.
//
//	nacos-lockd --port 8848 --data-dir ./data [--config application.properties]
//	nacos-lockd --port 8848 --data-dir ./data --cluster-conf cluster.conf --ip 10.0.0.1 [--join]
//
// --port is the Nacos main port (HTTP admin API): the SDK gRPC port is
// port+1000 and the Raft port port-1000, as in Nacos.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/compat"
	"nacos-lockd/internal/timerslack"
	"nacos-lockd/server"
)

func main() {
	if err := dispatch(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "nacos-lockd:", err)
		os.Exit(1)
	}
}

// dispatch runs a subcommand, or the server when there is none.
func dispatch(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "user":
			return runUser(args[1:], stdin, stdout, stderr)
		case "import-nacos":
			return runImportNacos(args[1:], stdout, stderr)
		case "snapshot":
			return runSnapshot(args[1:], stdout, stderr)
		case "container":
			return runContainer(ctx, args[1:], stdout, stderr)
		}
	}
	return run(ctx, args, stdout, stderr)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return runWith(ctx, args, os.Getenv, nil, stdout, stderr)
}

func runWith(ctx context.Context, args []string, getenv func(string) string, overlay compat.Properties, stdout, stderr io.Writer) error {
	cfg, err := parseConfigWith(args, getenv, overlay, stderr)
	if errors.Is(err, errHelp) {
		return nil
	}
	if errors.Is(err, errVersion) {
		_, err = fmt.Fprintln(stdout, currentBuild())
		return err
	}
	if err != nil {
		return err
	}
	// Before anything is opened: on success this starts the program
	// again, as the same process, and does not return.
	slackErr := timerslack.Ensure(cfg.timerSlack)
	log := newLogger(cfg, stderr)
	if slackErr != nil {
		log.Warn().Err(slackErr).Str("timer_slack", cfg.timerSlack.String()).Msg("timer slack not set; the server runs with the slack it was started with")
	} else if cfg.timerSlack > 0 {
		log.Info().Str("timer_slack", cfg.timerSlack.String()).Msg("timer slack set on every thread")
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	// The first signal starts the graceful shutdown; once it has, the
	// signals go back to their default action, so a second one ends the
	// process at once. Closing storage waits for its last flush, and a
	// disk that no longer takes writes (full, or the data directory
	// removed) turns that into a retry without end: an operator's second
	// Ctrl-C or SIGTERM must not be swallowed by it.
	context.AfterFunc(ctx, stop)
	return serve(ctx, cfg, log, stdout)
}

// newLogger builds the root logger. The level is process-wide (zerolog's
// global level) so the admin API can change it at runtime.
func newLogger(cfg config, w io.Writer) zerolog.Logger {
	if cfg.logFormat == "console" {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339Nano}
	}
	zerolog.SetGlobalLevel(cfg.logLevel)
	return zerolog.New(w).With().Timestamp().Logger()
}

func serve(ctx context.Context, cfg config, log zerolog.Logger, stdout io.Writer) error {
	// nil without --test-hooks, and always in a release build (no hooks
	// compiled in: testhooks.go needs -tags testhooks). Started before
	// storage opens (its failpoint), stopped after it has closed.
	hooks, err := startTestHooks(cfg.testHooks, log)
	if err != nil {
		return err
	}
	defer hooks.stop()
	build := currentBuild()
	sc := server.Config{
		Self: cfg.self, Members: cfg.members, Cluster: cfg.cluster, Join: cfg.join, DataDir: cfg.dataDir,
		Lock: cfg.lock, Auth: cfg.auth, TLS: cfg.tls, Identity: cfg.identity, CoalesceWindow: cfg.coalesceWindow, RaftLog: cfg.raftLog, RaftEngine: cfg.raftEngine,
		Transport: cfg.transport, Profiling: cfg.profiling, Version: build.Version, Commit: build.Commit, Log: log, Banner: stdout,
		Names: nameWatch{self: cfg.self, members: cfg.members, host: sysHost, log: log},
	}
	if cfg.importNacos != "" {
		sc.Install = func() error { return importAtStart(cfg.importNacos, cfg.dataDir, log) }
	}
	if hooks != nil {
		sc.Hooks = hooks
	}
	srv, err := server.New(ctx, sc)
	if errors.Is(err, server.ErrStopped) {
		return nil
	}
	if err != nil {
		return err
	}
	defer srv.Close() // the node, then storage, after Run's gateway has drained
	return srv.Run(ctx)
}
