package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"golang.org/x/sync/errgroup"

	"nacos-lockd/gateway"
	"nacos-lockd/gateway/admin"
	"nacos-lockd/gateway/auth"
	"nacos-lockd/replica"
	"nacos-lockd/settings"
	"nacos-lockd/statemachine"
	"nacos-lockd/storage"
)

// ErrStopped is New's error when ctx ended while the node waited for its
// own DNS name: the start was called off, which is not a failure.
var ErrStopped = errors.New("stopped while starting")

// Server is one nacos-lockd node, built by New: storage open, the Raft
// replica started, the gateway and the admin API built and both ports
// bound. Run serves; Close releases what New built.
type Server struct {
	cfg       Config
	log       zerolog.Logger
	replicaID uint64
	seal      bool // an installed table waits to be sealed (SealPending)
	httpsMain bool

	db        *storage.DB
	node      *replica.Node
	peers     *peerDirectory
	gate      *versionGate
	gw        *gateway.Server
	api       *admin.Server
	authn     *auth.Authenticator
	grpcLis   net.Listener
	httpLis   net.Listener
	ready     atomic.Bool
	stopWatch context.CancelFunc

	closeOnce sync.Once
}

// grants is the node's notifier: the gateway, once it exists. The node
// starts before the gateway (the gateway needs the node's peer directory),
// and may apply entries, replaying its log, in between; their
// notifications are for connections of an earlier run, which a gateway
// that exists but has not served yet has none of, so dropping them is what
// gateway.Notify would do. The pointer is set once, inside New.
type grants struct {
	gw atomic.Pointer[gateway.Server]
}

func (g *grants) notify(notes []statemachine.Notification) {
	if gw := g.gw.Load(); gw != nil {
		gw.Notify(notes)
	}
}

// New builds the node in dependency order: the data dir (join or stored
// replica id, install, seal check), storage, the Raft replica, the
// gateway, the admin API; and binds the main and SDK ports. The gateway's
// control loops start with Run. On error everything built so far is
// closed again.
func New(ctx context.Context, cfg Config) (_ *Server, err error) {
	log := cfg.Log
	self := cfg.Self
	raftDir := filepath.Join(cfg.DataDir, RaftDir)
	engine, err := replica.ChooseEngine(raftDir, cfg.RaftEngine, !cfg.Cluster && !cfg.Join)
	if err != nil {
		return nil, err
	}
	if err := checkPorts(cfg, engine == replica.EngineRaft); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: log}
	defer func() {
		if err != nil {
			s.Close()
		}
	}()
	replicaID, restarted, err := replica.StoredReplicaID(raftDir)
	switch {
	case err != nil:
		return nil, err
	case restarted:
	case cfg.Join:
		log.Info().Str("node", self.Address()).Msg("joining the cluster")
		if replicaID, err = joinCluster(ctx, cfg, newPeerDirectory(cfg.Members, cfg.TLS.HTTP.Enabled, cfg.Identity, nil)); err != nil {
			return nil, err
		}
	default:
		replicaID = cfg.bootstrapReplicaID()
	}
	s.replicaID = replicaID
	nodeID := strconv.FormatUint(replicaID, 10)
	log.Info().Str("version", cfg.Version).Str("commit", cfg.Commit).Str("node", nodeID).Str("mode", cfg.mode()).Int("main_port", self.Port).
		Int("grpc_port", self.GRPCPort()).Str("raft", self.RaftAddress()).Int("members", len(cfg.Members)).
		Str("data_dir", cfg.DataDir).Int64("default_lease_ms", cfg.Lock.DefaultLeaseMs).
		Int64("max_lease_ms", cfg.Lock.MaxLeaseMs).Int64("disconnect_grace_ms", cfg.Lock.DisconnectGraceMs).
		Int64("node_grace_ms", cfg.Lock.NodeGraceMs).Msg("nacos-lockd starting")

	if cfg.Install != nil {
		if err := cfg.Install(); err != nil {
			return nil, err
		}
	}
	// An imported or restored table starts a new Raft log: it must be
	// sealed into a snapshot before anyone could need to catch up from
	// that log, or a joining replica would miss it.
	s.seal = SealPending(cfg.DataDir)
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		return nil, fmt.Errorf("create data dir: %w", err)
	}
	if s.db, err = storage.Open(storage.Config{
		Dir:    filepath.Join(cfg.DataDir, LocksDir),
		Logger: log.With().Str("component", "storage").Logger(),
	}); err != nil {
		return nil, fmt.Errorf("open storage: %w", err)
	}
	cfg.step("storage opened")
	if err := checkStoredLevel(s.db); err != nil {
		return nil, err
	}

	if s.authn, err = newAuthenticator(cfg, log); err != nil {
		return nil, err
	}
	grpcTLS, err := serverTLS(cfg.TLS.GRPC)
	if err != nil {
		return nil, err
	}
	httpTLS, err := serverTLS(cfg.TLS.HTTP)
	if err != nil {
		return nil, err
	}
	s.httpsMain = httpTLS != nil
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	if cfg.Cluster && cfg.Names != nil {
		// Members listed by DNS name (a StatefulSet's pods) may not resolve
		// yet: their pods start one by one. dragonboat resolves names per
		// dial; the watch only tells the operator.
		if err := cfg.Names.WaitOwn(ctx); err != nil {
			if ctx.Err() != nil {
				return nil, ErrStopped
			}
			return nil, err
		}
		var watchCtx context.Context
		watchCtx, s.stopWatch = context.WithCancel(ctx)
		go cfg.Names.Watch(watchCtx)
	}
	notes := &grants{}
	rc := raftConfig(cfg, raftDir, replicaID, reg)
	rc.Engine = engine
	if s.node, err = replica.Start(rc, s.db, notes.notify, log); err != nil {
		return nil, explainRaftStart(raftDir, self.RaftAddress(), err)
	}
	cfg.step("node started")
	if cfg.Hooks != nil {
		cfg.Hooks.AttachNode(s.node)
	}
	s.peers = newPeerDirectory(cfg.Members, s.httpsMain, cfg.Identity, s.node)
	s.gate = newVersionGate(s.node, s.peers, [2]string{cfg.Version, cfg.Commit}, log)

	gwCfg := gateway.Config{
		ListenAddr: net.JoinHostPort("", strconv.Itoa(self.GRPCPort())),
		MainPort:   self.Port,
		NodeID:     nodeID,
		TLS:        grpcTLS,
		PeerAlive:  s.peers.alive,
		Metrics:    reg,
		Auth:       s.authn,
		Transport:  cfg.Transport,
	}
	// The lock settings, field by field as their tags bind them
	// (milliseconds to durations).
	settings.Copy(&gwCfg, &cfg.Lock)
	if s.gw, err = gateway.New(gwCfg, log); err != nil {
		return nil, err
	}
	if cfg.Hooks != nil {
		setTestClock(s.gw, cfg.Hooks.Clock()) // before the gateway gets notifications
	}
	notes.gw.Store(s.gw)
	cfg.step("gateway built")

	// Bind both ports before waiting for Raft, so a port clash fails fast.
	if s.grpcLis, err = net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(self.GRPCPort()))); err != nil {
		return nil, portError(cfg, "sdk", net.JoinHostPort("", strconv.Itoa(self.GRPCPort())), err)
	}
	if s.httpLis, err = net.Listen("tcp", net.JoinHostPort("", strconv.Itoa(self.Port))); err != nil {
		return nil, portError(cfg, "main", net.JoinHostPort("", strconv.Itoa(self.Port)), err)
	}
	if httpTLS != nil {
		s.httpLis = tls.NewListener(s.httpLis, httpTLS)
	}
	s.api = admin.New(admin.Config{
		Resolve:      s.peers.resolve,
		NewReplicaID: newReplicaID,
		Describe:     s.peers.describe,
		Ready:        s.ready.Load,
		Metrics:      promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		Auth:         s.authn,
		TokenTTL:     time.Duration(cfg.Auth.ExpireSeconds) * time.Second,
		Identity:     cfg.Identity,
		Locks:        s.node, // GET /v1/locks[/{lockType}/{key}], POST .../force-release
		Connections:  s.gw,   // GET /v1/connections: this node's registered clients
		Registerer:   reg,    // nacoslockd_admin_force_releases_total
		Version:      s.gate.advertised,
		Profiling:    cfg.Profiling, // GET /debug/pprof/...
	}, s.node, log)
	cfg.step("admin built")
	return s, nil
}

// raftConfig is the replica's configuration. Raft timing: the election
// timeout set or the mode's default, counted in ticks of the node's clock
// (settings.RaftTicks).
func raftConfig(cfg Config, raftDir string, replicaID uint64, reg prometheus.Registerer) replica.RaftConfig {
	election := settings.ElectionTimeoutMs(cfg.Lock.ElectionTimeoutMs, cfg.Cluster)
	rtt, electionRTT, heartbeatRTT := settings.RaftTicks(election, !cfg.Cluster && !cfg.Join)
	raftMembers := map[uint64]string{}
	switch {
	case cfg.Join: // the cluster already knows us; dragonboat wants no members
	case !cfg.Cluster:
		raftMembers[replicaID] = cfg.Self.RaftAddress()
	default:
		for _, m := range cfg.Members {
			raftMembers[m.ReplicaID()] = m.RaftAddress()
		}
	}
	return replica.RaftConfig{
		NodeHostDir: raftDir,
		RaftAddress: cfg.Self.RaftAddress(),
		ReplicaID:   replicaID,
		Members:     raftMembers,
		Join:        cfg.Join,
		// Snapshots of an on-disk state machine are cheap markers locally;
		// they matter for compacting the log and catching up new members.
		SnapshotEntries:    uint64(cfg.Lock.SnapshotEntries),
		CompactionOverhead: uint64(cfg.Lock.SnapshotEntries / 2),
		Metrics:            reg,
		RTTMillisecond:     rtt,
		ElectionRTT:        electionRTT,
		HeartbeatRTT:       heartbeatRTT,
		CoalesceWindow:     coalesceWindow(cfg.CoalesceWindow),
		RaftLog:            cfg.RaftLog,
	}
}

// ReplicaID is this node's Raft replica id.
func (s *Server) ReplicaID() uint64 { return s.replicaID }

// Ready reports what /readyz reports: Run has the node caught up and the
// gateway serving.
func (s *Server) Ready() bool { return s.ready.Load() }

// Run serves until ctx ends: the admin API at once; once the node is
// ready, the sealing of an installed table, then the gateway and its
// control loops. When ctx ends the gateway shuts down gracefully (hands
// leadership over, moves its clients) and Run returns; Close then closes
// the node and storage. A ctx that ends before the node is ready returns
// nil.
func (s *Server) Run(ctx context.Context) error {
	log, cfg := s.log, s.cfg
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return s.api.Serve(gctx, s.httpLis) })

	readyCtx, cancel := context.WithTimeout(gctx, 5*time.Minute)
	err := s.node.WaitReady(readyCtx)
	cancel()
	if err != nil {
		s.grpcLis.Close()
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
	if s.seal {
		// dragonboat refuses a snapshot request without a deadline.
		sealCtx, cancel := context.WithTimeout(ctx, time.Minute)
		err := s.node.SealInstalledState(sealCtx)
		cancel()
		if err != nil {
			s.grpcLis.Close()
			return fmt.Errorf("seal the imported table: %w", err)
		}
		if err := MarkSealed(cfg.DataDir); err != nil {
			s.grpcLis.Close()
			return err
		}
		log.Info().Msg("imported or restored lock table sealed into a snapshot")
		cfg.step("sealed")
	}
	g.Go(func() error {
		err := s.gw.Serve(gctx, s.grpcLis, s.node)
		cfg.step("gateway stopped")
		return err
	})
	g.Go(func() error { s.gate.run(gctx); return nil })
	// Traced before Ready turns true: a test that waits for Ready then
	// reads the steps must find this one.
	cfg.step("ready")
	s.ready.Store(true)
	st, _ := s.node.Stats()
	log.Info().Int("main_port", cfg.Self.Port).Int("grpc_port", cfg.Self.GRPCPort()).Int("raft_port", cfg.Self.RaftPort).
		Int("locks", st.Locks).Uint64("applied", st.Applied).Msg("nacos-lockd ready")
	if cfg.Banner != nil {
		s.printBanner(cfg.Banner)
	}
	if s.authn == nil {
		log.Warn().Msg("auth is off (nacos.core.auth.enabled=false) and the SDK and main ports listen on all interfaces: any client that reaches them can take and release locks")
	}

	if err := g.Wait(); err != nil {
		return err
	}
	log.Info().Msg("nacos-lockd stopped")
	return nil
}

// Close closes what New built, last built first: the listeners (if Run
// did not take them), the name watch, the node, storage. Call it after Run
// has returned; it is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		for _, l := range []net.Listener{s.grpcLis, s.httpLis} {
			if l != nil {
				_ = l.Close() // already closed once Run has served
			}
		}
		if s.node != nil {
			s.node.Close() // after the gateway has drained, before storage closes
			s.cfg.step("node closed")
		}
		if s.stopWatch != nil {
			s.stopWatch()
		}
		if s.db != nil {
			if err := s.db.Close(); err != nil {
				s.log.Error().Err(err).Msg("close storage")
			}
			s.cfg.step("storage closed")
		}
	})
}

// newAuthenticator sets up Nacos auth when nacos.core.auth.enabled is on.
func newAuthenticator(cfg Config, log zerolog.Logger) (*auth.Authenticator, error) {
	if !cfg.Auth.Enabled {
		return nil, nil
	}
	path := cfg.Auth.UsersFile
	if path == "" {
		path = filepath.Join(cfg.DataDir, "users.json")
	}
	store, err := auth.OpenStore(path)
	if err != nil {
		return nil, err
	}
	a, err := auth.New(auth.Config{Enabled: true, SecretKey: cfg.Auth.SecretKey, TokenTTL: time.Duration(cfg.Auth.ExpireSeconds) * time.Second}, store)
	if err != nil {
		return nil, err
	}
	if len(store.List()) == 0 {
		log.Warn().Str("users_file", path).Msg("auth is on but there are no users: create the first admin with `nacos-lockd user add --admin <name>`")
	}
	log.Info().Str("users_file", path).Int64("token_ttl_s", cfg.Auth.ExpireSeconds).Msg("auth enabled")
	return a, nil
}

// printBanner writes two plain lines to stdout, apart from the JSON log on
// stderr, for the person who just started the server: what runs and its
// role, then where clients and operators connect. Cluster members are
// listed by `nacos-lockctl cluster list`.
func (s *Server) printBanner(w io.Writer) {
	cfg := s.cfg
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	members, err := s.node.Membership(ctx)
	if err != nil {
		members = map[uint64]string{s.replicaID: cfg.Self.RaftAddress()}
	}
	leader, _ := s.node.LeaderID()
	role := "follower"
	if leader == s.replicaID {
		role = "leader"
	}
	of := ""
	if cfg.Cluster {
		leaderAddr := "unknown"
		for _, m := range s.peers.sorted(members) {
			if m.ReplicaID == leader {
				leaderAddr = m.Address
			}
		}
		of = fmt.Sprintf(" of %d members (leader %s)", len(members), leaderAddr)
	}
	scheme := "http"
	if s.httpsMain {
		scheme = "https"
	}
	fmt.Fprintf(w, "nacos-lockd %s ready: %s node %s, replica %d, %s%s; data in %s\n",
		cfg.Version, cfg.mode(), cfg.Self.Address(), s.replicaID, role, of, cfg.DataDir)
	raft := "Raft " + cfg.Self.RaftAddress()
	if s.node.Engine() == replica.EngineSolo {
		raft = "single-node engine (no Raft; --raft-engine raft on a new data dir for a node that may grow into a cluster)"
	}
	fmt.Fprintf(w, "clients: serverAddr=%s (SDK gRPC port %d); admin API, /readyz and /metrics: %s://%s; %s\n",
		cfg.Self.Address(), cfg.Self.GRPCPort(), scheme, cfg.Self.Address(), raft)
}
