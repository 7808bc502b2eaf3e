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
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"nacos-lockd/compat"
	"nacos-lockd/gateway"
	"nacos-lockd/gateway/admin"
	"nacos-lockd/gateway/auth"
	"nacos-lockd/replica"
	"nacos-lockd/settings"
	"nacos-lockd/storage"
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
	log := newLogger(cfg, stderr)
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
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
	self := cfg.self
	if err := checkPorts(cfg); err != nil {
		return err
	}
	raftDir := filepath.Join(cfg.dataDir, "raft")
	replicaID, restarted, err := replica.StoredReplicaID(raftDir)
	switch {
	case err != nil:
		return err
	case restarted:
	case cfg.join:
		log.Info().Str("node", self.Address()).Msg("joining the cluster")
		if replicaID, err = joinCluster(ctx, cfg, newPeerDirectory(cfg.members, cfg.tls.HTTP.Enabled, cfg.identity)); err != nil {
			return err
		}
	default:
		replicaID = cfg.bootstrapReplicaID()
	}
	nodeID := strconv.FormatUint(replicaID, 10)
	build := currentBuild()
	log.Info().Str("version", build.Version).Str("commit", build.Commit).Str("node", nodeID).Str("mode", cfg.mode()).Int("main_port", self.Port).
		Int("grpc_port", self.GRPCPort()).Str("raft", self.RaftAddress()).Int("members", len(cfg.members)).
		Str("data_dir", cfg.dataDir).Int64("default_lease_ms", cfg.lock.DefaultLeaseMs).
		Int64("max_lease_ms", cfg.lock.MaxLeaseMs).Int64("disconnect_grace_ms", cfg.lock.DisconnectGraceMs).
		Int64("node_grace_ms", cfg.lock.NodeGraceMs).Msg("nacos-lockd starting")

	if cfg.importNacos != "" {
		if err := importAtStart(cfg.importNacos, cfg.dataDir, log); err != nil {
			return err
		}
	}
	// An imported or restored table starts a new Raft log: it must be
	// sealed into a snapshot before anyone could need to catch up from
	// that log, or a joining replica would miss it.
	seal := sealPending(cfg.dataDir)
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

	// nil without --test-hooks, and always in a release build (no hooks
	// compiled in: testhooks.go needs -tags testhooks).
	hooks, err := startTestHooks(cfg.testHooks, log)
	if err != nil {
		return err
	}
	defer hooks.stop()

	authn, err := newAuthenticator(cfg, log)
	if err != nil {
		return err
	}
	grpcTLS, err := serverTLS(cfg.tls.GRPC)
	if err != nil {
		return err
	}
	httpTLS, err := serverTLS(cfg.tls.HTTP)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	peers := newPeerDirectory(cfg.members, httpTLS != nil, cfg.identity)
	gwCfg := gateway.Config{
		ListenAddr: net.JoinHostPort("", strconv.Itoa(self.GRPCPort())),
		MainPort:   self.Port,
		NodeID:     nodeID,
		TLS:        grpcTLS,
		PeerAlive:  peers.alive, // reads peers.node, set before Serve
		Metrics:    reg,
		Auth:       authn,
	}
	// The lock settings, field by field as their tags bind them
	// (milliseconds to durations).
	settings.Copy(&gwCfg, &cfg.lock)
	gw, err := gateway.New(gwCfg, log)
	if err != nil {
		return err
	}
	hooks.attachGateway(gw) // before the state machine can call gw.Notify
	// Raft timing: a tick of 1 ms (5 ms for long timeouts, to keep idle
	// CPU low), and the election timeout set or the mode's default.
	election := settings.ElectionTimeoutMs(cfg.lock.ElectionTimeoutMs, cfg.cluster)
	rtt := uint64(1)
	if election > 50 {
		rtt = 5
	}
	electionRTT := max(2, uint64(election)/rtt)
	raftMembers := map[uint64]string{}
	switch {
	case cfg.join: // the cluster already knows us; dragonboat wants no members
	case !cfg.cluster:
		raftMembers[replicaID] = self.RaftAddress()
	default:
		for _, m := range cfg.members {
			raftMembers[m.ReplicaID()] = m.RaftAddress()
		}
	}
	if cfg.cluster {
		// Members listed by DNS name (a StatefulSet's pods) may not resolve
		// yet: their pods start one by one. dragonboat resolves names per
		// dial; the watch only tells the operator.
		if err := waitOwnName(ctx, self, sysHost, log, 2*time.Second); err != nil {
			if ctx.Err() != nil {
				return nil // stopped while starting
			}
			return err
		}
		watchCtx, stopWatch := context.WithCancel(ctx)
		defer stopWatch()
		go watchNames(watchCtx, cfg.members, self, sysHost, log, 5*time.Second)
	}
	node, err := replica.Start(replica.RaftConfig{
		NodeHostDir: raftDir,
		RaftAddress: self.RaftAddress(),
		ReplicaID:   replicaID,
		Members:     raftMembers,
		Join:        cfg.join,
		// Snapshots of an on-disk state machine are cheap markers locally;
		// they matter for compacting the log and catching up new members.
		SnapshotEntries:    uint64(cfg.lock.SnapshotEntries),
		CompactionOverhead: uint64(cfg.lock.SnapshotEntries / 2),
		Metrics:            reg,
		RTTMillisecond:     rtt,
		ElectionRTT:        electionRTT,
		HeartbeatRTT:       max(1, electionRTT/10),
		CoalesceWindow:     coalesceWindow(cfg.coalesceWindow),
	}, db, gw.Notify, log)
	if err != nil {
		return explainRaftStart(raftDir, self.RaftAddress(), err)
	}
	defer node.Close() // after the gateway has drained, before storage closes
	peers.node = node
	hooks.attach(node)

	// Bind both ports before waiting for Raft, so a port clash fails fast.
	grpcLis, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(self.GRPCPort())))
	if err != nil {
		return portError(cfg, "sdk", net.JoinHostPort("", strconv.Itoa(self.GRPCPort())), err)
	}
	httpLis, err := net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(self.Port)))
	if err != nil {
		grpcLis.Close()
		return portError(cfg, "main", net.JoinHostPort("", strconv.Itoa(self.Port)), err)
	}
	if httpTLS != nil {
		httpLis = tls.NewListener(httpLis, httpTLS)
	}
	var ready atomic.Bool
	api := admin.New(admin.Config{
		Resolve:      peers.resolve,
		NewReplicaID: newReplicaID,
		Describe:     peers.describe,
		Ready:        ready.Load,
		Metrics:      promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		Auth:         authn,
		TokenTTL:     time.Duration(cfg.auth.ExpireSeconds) * time.Second,
		Identity:     cfg.identity,
		Locks:        node, // GET /v1/locks[/{lockType}/{key}], POST .../force-release
		Connections:  gw,   // GET /v1/connections: this node's registered clients
		Registerer:   reg,  // nacoslockd_admin_force_releases_total
	}, node, log)

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return api.Serve(gctx, httpLis) })

	readyCtx, cancel := context.WithTimeout(gctx, 5*time.Minute)
	err = node.WaitReady(readyCtx)
	cancel()
	if err != nil {
		grpcLis.Close()
		stop := context.Cause(gctx)
		_ = g.Wait()
		if ctx.Err() != nil {
			return nil // stopped while starting
		}
		if stop != nil && !errors.Is(stop, context.Canceled) {
			return stop
		}
		return err
	}
	if seal {
		if err := node.SealInstalledState(ctx); err != nil {
			grpcLis.Close()
			return fmt.Errorf("seal the imported table: %w", err)
		}
		if err := markSealed(cfg.dataDir); err != nil {
			grpcLis.Close()
			return err
		}
		log.Info().Msg("imported or restored lock table sealed into a snapshot")
	}
	g.Go(func() error { return gw.Serve(gctx, grpcLis, node) })
	ready.Store(true)
	st, _ := node.Stats()
	log.Info().Int("main_port", self.Port).Int("grpc_port", self.GRPCPort()).Int("raft_port", self.RaftPort).
		Int("locks", st.Locks).Uint64("applied", st.Applied).Msg("nacos-lockd ready")
	printBanner(stdout, cfg, replicaID, node, peers, httpTLS != nil)
	if authn == nil {
		log.Warn().Msg("auth is off (nacos.core.auth.enabled=false) and the SDK and main ports listen on all interfaces: any client that reaches them can take and release locks")
	}

	if err := g.Wait(); err != nil {
		return err
	}
	log.Info().Msg("nacos-lockd stopped")
	return nil
}

// newAuthenticator sets up Nacos auth when nacos.core.auth.enabled is on.
func newAuthenticator(cfg config, log zerolog.Logger) (*auth.Authenticator, error) {
	if !cfg.auth.Enabled {
		return nil, nil
	}
	path := cfg.auth.UsersFile
	if path == "" {
		path = filepath.Join(cfg.dataDir, "users.json")
	}
	store, err := auth.OpenStore(path)
	if err != nil {
		return nil, err
	}
	a, err := auth.New(auth.Config{Enabled: true, SecretKey: cfg.auth.SecretKey, TokenTTL: time.Duration(cfg.auth.ExpireSeconds) * time.Second}, store)
	if err != nil {
		return nil, err
	}
	if len(store.List()) == 0 {
		log.Warn().Str("users_file", path).Msg("auth is on but there are no users: create the first admin with `nacos-lockd user add --admin <name>`")
	}
	log.Info().Str("users_file", path).Int64("token_ttl_s", cfg.auth.ExpireSeconds).Msg("auth enabled")
	return a, nil
}

// printBanner writes two plain lines to stdout, apart from the JSON log on
// stderr, for the person who just started the server: what runs and its
// role, then where clients and operators connect. Cluster members are
// listed by `nacos-lockctl cluster list`.
func printBanner(w io.Writer, cfg config, replicaID uint64, node *replica.Node, peers *peerDirectory, httpsMain bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	members, err := node.Membership(ctx)
	if err != nil {
		members = map[uint64]string{replicaID: cfg.self.RaftAddress()}
	}
	leader, _ := node.LeaderID()
	role := "follower"
	if leader == replicaID {
		role = "leader"
	}
	of := ""
	if cfg.cluster {
		leaderAddr := "unknown"
		for _, m := range peers.sorted(members) {
			if m.ReplicaID == leader {
				leaderAddr = m.Address
			}
		}
		of = fmt.Sprintf(" of %d members (leader %s)", len(members), leaderAddr)
	}
	scheme := "http"
	if httpsMain {
		scheme = "https"
	}
	fmt.Fprintf(w, "nacos-lockd %s ready: %s node %s, replica %d, %s%s; data in %s\n",
		currentBuild().Version, cfg.mode(), cfg.self.Address(), replicaID, role, of, cfg.dataDir)
	fmt.Fprintf(w, "clients: serverAddr=%s (SDK gRPC port %d); admin API, /readyz and /metrics: %s://%s; Raft %s\n",
		cfg.self.Address(), cfg.self.GRPCPort(), scheme, cfg.self.Address(), cfg.self.RaftAddress())
}

// coalesceWindow maps the flag (0 = off) to RaftConfig's (negative = off).
func coalesceWindow(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
