package replica

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/client"
	"github.com/lni/dragonboat/v4/config"
	dblogger "github.com/lni/dragonboat/v4/logger"
	"github.com/lni/dragonboat/v4/raftio"
	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"nacos-lockd/settings"
	"nacos-lockd/storage"

	"nacos-lockd/statemachine"
	"nacos-lockd/statemachine/lockview"
)

// ErrUnavailable means the command could not be committed in time (no
// leader, shard not ready, timeout, shutting down). The command may or may
// not have been applied.
var ErrUnavailable = errors.New("raft unavailable")

// RaftConfig configures the node's Raft replica. The zero value of every
// tuning field picks the default noted beside it.
type RaftConfig struct {
	NodeHostDir string            // dragonboat's directory (log, metadata); required
	RaftAddress string            // host:port of this replica's Raft transport; required
	ShardID     uint64            // default 1
	ReplicaID   uint64            // default 1
	Members     map[uint64]string // initial members by replica id; default {ReplicaID: RaftAddress}
	Join        bool              // start as a new member of an existing shard

	// Metrics is where the node registers its series; nil records none.
	Metrics prometheus.Registerer

	RTTMillisecond     uint64 // default 1 (loopback)
	ElectionRTT        uint64 // default 10
	HeartbeatRTT       uint64 // default 1
	SnapshotEntries    uint64 // default: settings.RaftSnapshotEntries's
	CompactionOverhead uint64 // default: half that

	// RaftLog is the log a new data dir keeps: LogLockd (the default when
	// empty) or LogPebble. A data dir keeps the log it was made with.
	RaftLog string

	// Engine is what orders and logs the entries: EngineRaft (dragonboat,
	// the default when empty) or EngineSolo (solo.go), for a shard of one
	// member that never grows. A data dir stays with the engine that made
	// it.
	Engine string

	// CoalesceWindow is how long renews in quick succession are collected
	// into one entry (coalesce.go): 0 picks DefaultCoalesceWindow. Negative
	// turns batching off altogether: every command is its own entry.
	CoalesceWindow time.Duration
}

func (c *RaftConfig) withDefaults() RaftConfig {
	d := *c
	set := func(v *uint64, def uint64) {
		if *v == 0 {
			*v = def
		}
	}
	set(&d.ShardID, 1)
	set(&d.ReplicaID, 1)
	set(&d.RTTMillisecond, 1)
	set(&d.ElectionRTT, 10)
	set(&d.HeartbeatRTT, 1)
	set(&d.SnapshotEntries, uint64(settings.RaftSnapshotEntries.DefaultInt()))
	set(&d.CompactionOverhead, uint64(settings.RaftSnapshotEntries.DefaultInt()/2))
	if d.CoalesceWindow == 0 {
		d.CoalesceWindow = DefaultCoalesceWindow
	}
	if len(d.Members) == 0 && !d.Join {
		d.Members = map[uint64]string{d.ReplicaID: d.RaftAddress}
	}
	return d
}

// Validate reports a configuration that cannot start.
func (c RaftConfig) Validate() error {
	switch {
	case c.NodeHostDir == "":
		return errors.New("raft: node host directory is required")
	case c.RaftAddress == "":
		return errors.New("raft: raft address is required")
	}
	return nil
}

// bootstrappedMarker, in the node host directory, records that the
// replica has started once, and as which replica id.
const bootstrappedMarker = "nacos-lockd-replica"

// StoredReplicaID reports the replica id a data directory's Raft state
// belongs to, if the replica has started before.
func StoredReplicaID(nodeHostDir string) (uint64, bool, error) {
	b, err := os.ReadFile(filepath.Join(nodeHostDir, bootstrappedMarker))
	if errors.Is(err, os.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("read replica marker: %w", err)
	}
	id, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || id == 0 {
		return 0, false, fmt.Errorf("replica marker %s holds %q, not a replica id", filepath.Join(nodeHostDir, bootstrappedMarker), b)
	}
	return id, true, nil
}

// Node is this process's replica of the lock table.
type Node struct {
	nh   *dragonboat.NodeHost // nil under the sole-voter engine
	solo *soloEngine          // nil under Raft
	cfg  RaftConfig
	log  zerolog.Logger
	m    *nodeMetrics
	gc   *groupCommit // nil when batching is off
	// session is dragonboat's no-op session: every proposal uses it, and
	// fetching it per proposal allocated.
	session *client.Session
	// level is the cluster level the local replica has applied (diskSM
	// keeps it): what this node's proposers pick their encodings from.
	level atomic.Int64
	// sm is the replica's state machine once dragonboat has made it: the
	// proposers' hints read its table directly.
	sm atomic.Pointer[diskSM]
	// logSyncs counts the synced writes of our own log, under either
	// engine (raftlog.Options.Syncs); pebble's log counts none.
	logSyncs atomic.Uint64
}

// LogDBConfig is the settings of the log every node keeps: a small
// memtable, as lock commands are tiny. The bench's raft-noop floor gives
// dragonboat the same.
func LogDBConfig() config.LogDBConfig { return config.GetSmallMemLogDBConfig() }

// Start opens the Raft replica over db. notify receives grants to waiters
// (see Notifier). The caller closes the node before closing db.
func Start(cfg RaftConfig, db *storage.DB, notify Notifier, log zerolog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	switch cfg.Engine {
	case EngineSolo:
		return startSoloNode(cfg, db, notify, log)
	case "", EngineRaft:
	default:
		return nil, fmt.Errorf("raft: unknown engine %q (want %q or %q)", cfg.Engine, EngineRaft, EngineSolo)
	}
	if made, err := madeBy(cfg.NodeHostDir); err != nil {
		return nil, err
	} else if made == EngineSolo {
		return nil, fmt.Errorf("data dir %s was made by the single-node engine, which it keeps: start it without the Raft engine, or restore a snapshot of it onto an empty data dir", cfg.NodeHostDir)
	}
	setDragonboatLogger(log)
	raftLog, err := chooseLog(cfg.NodeHostDir, cfg.RaftLog)
	if err != nil {
		return nil, err
	}
	log.Info().Str("raft_log", raftLog).Msg("raft log chosen (a data dir keeps the log it was made with)")
	n := newNode(cfg, log)
	nhc := config.NodeHostConfig{
		NodeHostDir:       cfg.NodeHostDir,
		WALDir:            cfg.NodeHostDir,
		RTTMillisecond:    cfg.RTTMillisecond,
		RaftAddress:       cfg.RaftAddress,
		RaftEventListener: leaderLogger{log: log, m: n.m},
		Expert:            logFactory(raftLog, &n.logSyncs),
	}
	nh, err := dragonboat.NewNodeHost(nhc)
	if err != nil {
		return nil, fmt.Errorf("start raft node host: %w", err)
	}
	n.nh = nh
	members := make(map[uint64]dragonboat.Target, len(cfg.Members))
	for id, addr := range cfg.Members {
		members[id] = addr
	}
	rc := config.Config{
		ReplicaID:          cfg.ReplicaID,
		ShardID:            cfg.ShardID,
		CheckQuorum:        true,
		PreVote:            true,
		ElectionRTT:        cfg.ElectionRTT,
		HeartbeatRTT:       cfg.HeartbeatRTT,
		SnapshotEntries:    cfg.SnapshotEntries,
		CompactionOverhead: cfg.CompactionOverhead,
	}
	create := func(shardID, replicaID uint64) sm.IOnDiskStateMachine {
		return n.newStateMachine(db, notify)
	}
	// A replica that has started before restarts from its stored state,
	// whatever the members and join flag say now: membership changes go
	// through Raft, and cluster.conf only seeds the very first start.
	// (dragonboat panics rather than report a missing bootstrap record, so
	// we remember a successful first start ourselves.)
	join := cfg.Join
	if id, ok, err := StoredReplicaID(cfg.NodeHostDir); err != nil {
		nh.Close()
		return nil, err
	} else if ok {
		if id != cfg.ReplicaID {
			nh.Close()
			return nil, fmt.Errorf("data dir belongs to replica %d, not %d", id, cfg.ReplicaID)
		}
		members, join = nil, false
	}
	if err := nh.StartOnDiskReplica(members, join, create, rc); err != nil {
		nh.Close()
		return nil, fmt.Errorf("start raft replica: %w", err)
	}
	if err := recordReplicaID(cfg.NodeHostDir, cfg.ReplicaID); err != nil {
		nh.Close()
		return nil, err
	}
	n.session = nh.GetNoOPSession(cfg.ShardID)
	if cfg.CoalesceWindow > 0 {
		n.gc = newGroupCommit(n, cfg.CoalesceWindow)
	}
	return n, nil
}

// startSoloNode opens a node under the sole-voter engine (solo.go).
func startSoloNode(cfg RaftConfig, db *storage.DB, notify Notifier, log zerolog.Logger) (*Node, error) {
	if cfg.Join || len(cfg.Members) != 1 || cfg.Members[cfg.ReplicaID] == "" {
		return nil, errors.New("raft: the single-node engine runs a shard of this one member: it cannot join a cluster or start with others")
	}
	if made, err := madeBy(cfg.NodeHostDir); err != nil {
		return nil, err
	} else if made == EngineRaft {
		return nil, fmt.Errorf("data dir %s was made by the Raft engine, which it keeps: start it with the Raft engine, or restore a snapshot of it onto an empty data dir", cfg.NodeHostDir)
	}
	if id, ok, err := StoredReplicaID(cfg.NodeHostDir); err != nil {
		return nil, err
	} else if ok && id != cfg.ReplicaID {
		return nil, fmt.Errorf("data dir belongs to replica %d, not %d", id, cfg.ReplicaID)
	}
	if err := os.MkdirAll(soloDir(cfg.NodeHostDir), 0o700); err != nil {
		return nil, fmt.Errorf("create single-node log dir: %w", err)
	}
	n := newNode(cfg, log)
	d := n.newStateMachine(db, notify)
	e, err := startSolo(soloDir(cfg.NodeHostDir), d, cfg.ShardID, cfg.ReplicaID, cfg.SnapshotEntries, &n.logSyncs, log.With().Str("component", "solo").Logger())
	if err != nil {
		return nil, err
	}
	if err := recordReplicaID(cfg.NodeHostDir, cfg.ReplicaID); err != nil {
		e.close()
		return nil, err
	}
	n.solo = e
	if cfg.CoalesceWindow > 0 {
		n.gc = newGroupCommit(n, cfg.CoalesceWindow)
	}
	n.m.leader(soloTerm, true)
	log.Info().Str("engine", EngineSolo).Msg("single-node engine started: entries are ordered, logged and applied without Raft")
	return n, nil
}

// newNode is a node's common part, before an engine runs under it.
func newNode(cfg RaftConfig, log zerolog.Logger) *Node {
	n := &Node{cfg: cfg, log: log}
	n.level.Store(statemachine.LevelBaseline)
	n.m = newNodeMetrics(cfg.Metrics, n)
	return n
}

// newStateMachine makes the replica's state machine over db, which either
// engine applies its entries through.
func (n *Node) newStateMachine(db *storage.DB, notify Notifier) *diskSM {
	d := newDiskSM(db, notify, n.log.With().Str("component", "statemachine").Logger())
	d.m = n.m
	d.level = &n.level
	n.sm.Store(d)
	return d
}

// recordReplicaID records in the node host directory that the replica
// has started, as which replica id (StoredReplicaID reads it).
func recordReplicaID(nodeHostDir string, id uint64) error {
	marker := filepath.Join(nodeHostDir, bootstrappedMarker)
	if err := os.WriteFile(marker, []byte(strconv.FormatUint(id, 10)+"\n"), 0o600); err != nil {
		return fmt.Errorf("record replica start: %w", err)
	}
	return nil
}

// Close stops the replica. Proposals in flight fail with ErrUnavailable.
func (n *Node) Close() {
	if n.solo != nil {
		n.solo.close()
		if err := n.sm.Load().Close(); err != nil {
			n.log.Warn().Err(err).Msg("persist the lock table at close")
		}
	} else {
		n.nh.Close()
	}
	if n.gc != nil {
		n.gc.close()
	}
}

// ReplicaID is this node's replica id.
func (n *Node) ReplicaID() uint64 { return n.cfg.ReplicaID }

// Engine is the engine the node runs: EngineRaft or EngineSolo.
func (n *Node) Engine() string {
	if n.solo != nil {
		return EngineSolo
	}
	return EngineRaft
}

// Propose commits cmd and returns its result. ctx must carry a deadline.
// With batching on, commands are proposed in the order they arrive and
// may share an entry with others (coalesce.go).
func (n *Node) Propose(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error) {
	if n.gc != nil {
		return n.gc.propose(ctx, cmd)
	}
	return n.proposeOne(ctx, cmd, time.Now())
}

// ErrNotOrdered is Record's answer when batching is off: without the one
// ordered queue a command proposed later could overtake it.
var ErrNotOrdered = errors.New("raft: ordered recording needs batching on")

// ErrLevelTooLow is Record's answer for a CLAIM while the cluster level
// is below statemachine.LevelLeaseAtNow: this build writes CLAIMs only
// with LeaseAtNow, which a member without the gate refuses, so the claim
// goes through Raft as its ACQUIRE instead.
var ErrLevelTooLow = errors.New("raft: the cluster level does not allow this encoding yet")

// ErrRecordRefused is what Record reports for a command that was committed
// but whose result was a refusal: for a CLAIM, the grant it records had
// already passed on when it applied.
var ErrRecordRefused = errors.New("raft: recorded command refused")

// ClusterLevel is the cluster level the local replica has applied
// (statemachine/level.go). It only rises, in log order, so a command
// encoded for it is behind the level entry that allowed it in the log.
func (n *Node) ClusterLevel() int { return int(n.level.Load()) }

// ProposeLevel commits a level entry raising the cluster level to level
// (the version gate's leader loop calls it once every member reads it).
// The table ignores an entry that would lower the level.
func (n *Node) ProposeLevel(ctx context.Context, level int) error {
	data, err := n.proposeEntry(ctx, statemachine.EncodeLevel(level))
	if err != nil {
		return fmt.Errorf("propose cluster level %d: %w", level, err)
	}
	if r, err := statemachine.DecodeResult(data); err != nil || r.Code != statemachine.CodeOK {
		return fmt.Errorf("propose cluster level %d: refused (%v, %v)", level, r.Code, err)
	}
	return nil
}

// Record queues cmd behind every command already queued or proposed on
// this node and returns without waiting for it: a command proposed after
// Record returns is committed after it, or cmd is not committed at all
// (an entry dragonboat drops is proposed again, behind what went
// meanwhile, but a recorded command is failed instead). The channel delivers
// nil once cmd is committed and applied with success, ErrRecordRefused if
// it was committed but refused (a CLAIM whose grant had passed on), or why
// it was not committed. A cmd not proposed by deadline is failed. (A
// deadline, not a context: nothing cancels a queued record, and a claim's
// answer on a hand-off's path costs no timer.)
func (n *Node) Record(deadline time.Time, cmd statemachine.Command) (<-chan error, error) {
	if n.gc == nil {
		return nil, ErrNotOrdered
	}
	if cmd.Op == statemachine.OpClaim && n.ClusterLevel() < statemachine.LevelLeaseAtNow {
		return nil, ErrLevelTooLow
	}
	return n.gc.record(deadline, cmd)
}

// proposeOne commits cmd as an entry of its own.
func (n *Node) proposeOne(ctx context.Context, cmd statemachine.Command, start time.Time) (statemachine.Result, error) {
	data, err := n.proposeEntry(ctx, cmd.Encode())
	if err != nil {
		return statemachine.Result{}, fmt.Errorf("propose %s: %w", cmd.Op, err)
	}
	n.m.proposed(cmd.Op, time.Since(start))
	r, err := statemachine.DecodeResult(data)
	if err != nil {
		return statemachine.Result{}, fmt.Errorf("decode %s result: %w", cmd.Op, err)
	}
	return r, nil
}

// proposeEntry commits one log entry and returns its result data. A
// proposal dragonboat dropped before it reached the log (no leader yet,
// busy) is retried until ctx ends: it was never appended, so resending
// cannot apply it twice. A timeout is not retried: it is ambiguous.
func (n *Node) proposeEntry(ctx context.Context, entry []byte) ([]byte, error) {
	if n.solo != nil {
		out, err := n.solo.submit(entry, 1, false)
		if err != nil {
			return nil, err
		}
		select {
		case r := <-out:
			return r.data, r.err
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, ctx.Err())
		}
	}
	backoff := 2 * time.Millisecond
	for {
		res, err := n.nh.SyncPropose(ctx, n.session, entry)
		if err == nil {
			return res.Data, nil
		}
		if !errors.Is(err, dragonboat.ErrShardNotReady) && !errors.Is(err, dragonboat.ErrSystemBusy) {
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
		case <-t.C:
		}
		backoff = min(2*backoff, 100*time.Millisecond)
	}
}

// IsLeader reports whether this replica currently leads the shard.
func (n *Node) IsLeader() bool {
	if n.solo != nil {
		return true
	}
	id, _, ok, err := n.nh.GetLeaderID(n.cfg.ShardID)
	return err == nil && ok && id == n.cfg.ReplicaID
}

// soleVoter reports whether this replica leads a shard whose only voting
// member it is, by its applied membership. Then every entry was committed
// by this replica alone, and every write acknowledged to a client was
// applied here before the answer left, so the local replica's state is a
// linearizable read without ReadIndex (a ReadIndex waits for the step
// worker, which may be in the middle of the next entry's sync: on a hand-
// off, that put a second sync between the grant and the claim's answer).
// A member added later takes effect when its change applies here (the
// applied membership is what this reads), and it cannot lead without this
// replica's vote, which ends this replica's leadership first.
func (n *Node) soleVoter() bool {
	if n.solo != nil {
		return true
	}
	if !n.IsLeader() {
		return false
	}
	info := n.nh.GetNodeHostInfo(dragonboat.NodeHostInfoOption{SkipLogInfo: true})
	if info == nil {
		return false // closed
	}
	for _, s := range info.ShardInfoList {
		if s.ShardID == n.cfg.ShardID {
			_, member := s.Replicas[n.cfg.ReplicaID]
			return !s.Pending && member && len(s.Replicas) == 1
		}
	}
	return false
}

// WaitReady blocks until the shard has a leader and this replica has
// applied everything committed before the call (a linearizable read).
func (n *Node) WaitReady(ctx context.Context) error {
	if n.solo != nil {
		return nil // ready once started: the log was replayed
	}
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	var last error
	for {
		if _, _, ok, err := n.nh.GetLeaderID(n.cfg.ShardID); err == nil && ok {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, last = n.nh.SyncRead(rctx, n.cfg.ShardID, statemachine.StatsQuery{})
			cancel()
			if last == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for raft: %w (last error: %v)", ctx.Err(), last)
		case <-poll.C:
		}
	}
}

// Stats reads table figures from the local replica (possibly stale).
func (n *Node) Stats() (statemachine.Stats, error) {
	v, err := n.staleRead(statemachine.StatsQuery{})
	if err != nil {
		return statemachine.Stats{}, fmt.Errorf("read stats: %w", err)
	}
	return v.(statemachine.Stats), nil
}

// Lock reads one lock from the local replica (possibly stale).
func (n *Node) Lock(kind statemachine.Kind, key string) (lockview.Lock, error) {
	v, err := n.staleRead(statemachine.LockQuery{Kind: kind, Key: key})
	if err != nil {
		return lockview.Lock{}, fmt.Errorf("read lock: %w", err)
	}
	return v.(lockview.Lock), nil
}

// Expired lists leases that ended before nowMs according to the local
// replica. Only the leader's reaper calls it, and EXPIRE re-checks in apply.
func (n *Node) Expired(nowMs int64, limit int) ([]statemachine.ExpiredLease, error) {
	v, err := n.staleRead(statemachine.ExpiredQuery{NowMs: nowMs, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("read expired leases: %w", err)
	}
	return v.([]statemachine.ExpiredLease), nil
}

type leaderLogger struct {
	log zerolog.Logger
	m   *nodeMetrics
}

func (l leaderLogger) LeaderUpdated(info raftio.LeaderInfo) {
	l.m.leader(info.Term, info.LeaderID == info.ReplicaID)
	l.log.Info().Uint64("shard", info.ShardID).Uint64("replica", info.ReplicaID).
		Uint64("term", info.Term).Uint64("leader", info.LeaderID).Msg("raft leader changed")
}

// dragonboat's logger factory can be set once per process; the adapter
// forwards to whichever logger the latest Start was given.
var (
	dbLogOnce sync.Once
	dbLog     atomic.Pointer[zerolog.Logger]
)

func setDragonboatLogger(log zerolog.Logger) {
	l := log.With().Str("component", "raft").Logger()
	dbLog.Store(&l)
	dbLogOnce.Do(func() {
		dblogger.SetLoggerFactory(func(pkg string) dblogger.ILogger { return dbLogAdapter{pkg: pkg} })
	})
}

// dbLogAdapter forwards dragonboat's messages at the levels dragonboatLevel
// (dblog.go) maps them to.
type dbLogAdapter struct{ pkg string }

func (a dbLogAdapter) l() *zerolog.Logger             { return dbLog.Load() }
func (a dbLogAdapter) SetLevel(dblogger.LogLevel)     {}
func (a dbLogAdapter) Debugf(f string, args ...any)   { a.logf(dblogger.DEBUG, f, args) }
func (a dbLogAdapter) Infof(f string, args ...any)    { a.logf(dblogger.INFO, f, args) }
func (a dbLogAdapter) Warningf(f string, args ...any) { a.logf(dblogger.WARNING, f, args) }
func (a dbLogAdapter) Errorf(f string, args ...any)   { a.logf(dblogger.ERROR, f, args) }
func (a dbLogAdapter) Panicf(f string, args ...any)   { a.logf(dblogger.CRITICAL, f, args) }

// staleRead answers q from the local replica, whatever it has applied.
func (n *Node) staleRead(q any) (any, error) {
	if n.solo != nil {
		return n.sm.Load().Lookup(q)
	}
	return n.nh.StaleRead(n.cfg.ShardID, q)
}

// LeaderID returns the current leader's replica id, if one is known.
func (n *Node) LeaderID() (uint64, bool) {
	if n.solo != nil {
		return n.cfg.ReplicaID, true
	}
	id, _, ok, err := n.nh.GetLeaderID(n.cfg.ShardID)
	return id, err == nil && ok
}

// Membership returns the shard's voting members (replica id -> Raft
// address), read linearizably.
func (n *Node) Membership(ctx context.Context) (map[uint64]string, error) {
	if n.solo != nil {
		return map[uint64]string{n.cfg.ReplicaID: n.cfg.RaftAddress}, nil
	}
	var m *dragonboat.Membership
	err := retryRead(ctx, func(actx context.Context) (err error) {
		m, err = n.nh.SyncGetShardMembership(actx, n.cfg.ShardID)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read membership: %w: %w", ErrUnavailable, err)
	}
	return m.Nodes, nil
}

// AddReplica adds a voting member through Raft. The new node then starts
// with Join set and catches up from a snapshot and the log.
func (n *Node) AddReplica(ctx context.Context, replicaID uint64, raftAddr string) error {
	if n.solo != nil {
		return fmt.Errorf("add replica %d: %w", replicaID, ErrSoleVoterEngine)
	}
	if err := n.nh.SyncRequestAddReplica(ctx, n.cfg.ShardID, replicaID, raftAddr, 0); err != nil {
		return fmt.Errorf("add replica %d: %w: %w", replicaID, ErrUnavailable, err)
	}
	return nil
}

// RemoveReplica removes a member through Raft. A removed replica id can
// never rejoin.
func (n *Node) RemoveReplica(ctx context.Context, replicaID uint64) error {
	if n.solo != nil {
		return fmt.Errorf("remove replica %d: %w", replicaID, ErrSoleVoterEngine)
	}
	if err := n.nh.SyncRequestDeleteReplica(ctx, n.cfg.ShardID, replicaID, 0); err != nil {
		return fmt.Errorf("remove replica %d: %w: %w", replicaID, ErrUnavailable, err)
	}
	return nil
}

// TransferLeadership hands leadership to another member, when this node
// leads and another exists, and waits until it has moved or ctx ends.
func (n *Node) TransferLeadership(ctx context.Context) error {
	if !n.IsLeader() {
		return nil
	}
	members, err := n.Membership(ctx)
	if err != nil {
		return err
	}
	var target uint64
	for id := range members {
		if id != n.cfg.ReplicaID && (target == 0 || id < target) {
			target = id
		}
	}
	if target == 0 {
		return nil // alone: nobody to hand over to
	}
	if err := n.nh.RequestLeaderTransfer(n.cfg.ShardID, target); err != nil {
		return fmt.Errorf("transfer leadership to %d: %w", target, err)
	}
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for {
		if id, ok := n.LeaderID(); ok && id != n.cfg.ReplicaID {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("transfer leadership to %d: %w", target, ctx.Err())
		case <-poll.C:
		}
	}
}

// LockLinearizable reads one lock after catching up with the leader's
// commit index (ReadIndex): what admin queries and the gateway's claims
// use. A sole voter that leads reads its own replica instead (soleVoter).
func (n *Node) LockLinearizable(ctx context.Context, kind statemachine.Kind, key string) (lockview.Lock, error) {
	if n.soleVoter() {
		if l, err := n.Lock(kind, key); err == nil {
			return l, nil
		}
	}
	if n.solo != nil {
		return n.Lock(kind, key)
	}
	var v any
	err := retryRead(ctx, func(actx context.Context) (err error) {
		v, err = n.nh.SyncRead(actx, n.cfg.ShardID, statemachine.LockQuery{Kind: kind, Key: key})
		return err
	})
	if err != nil {
		return lockview.Lock{}, fmt.Errorf("read lock: %w: %w", ErrUnavailable, err)
	}
	return v.(lockview.Lock), nil
}

// LockIfSoleVoter reads one lock from the local replica if this replica
// leads a shard whose only voter it is (soleVoter): then the read is
// linearizable. Otherwise it reports false. It never waits for Raft, so
// the gateway may call it from Notify, in the apply goroutine, where a
// ReadIndex would wait for that goroutine itself.
func (n *Node) LockIfSoleVoter(kind statemachine.Kind, key string) (lockview.Lock, bool) {
	if !n.soleVoter() {
		return lockview.Lock{}, false
	}
	l, err := n.Lock(kind, key)
	return l, err == nil
}

// Nodes lists the node ids whose connections the local replica's table
// references.
func (n *Node) Nodes() ([]string, error) {
	v, err := n.staleRead(statemachine.NodesQuery{})
	if err != nil {
		return nil, fmt.Errorf("read nodes: %w", err)
	}
	return v.([]string), nil
}

// Conns lists one node's connections referenced by the local table.
func (n *Node) Conns(node string) ([]string, error) {
	v, err := n.staleRead(statemachine.ConnsQuery{Node: node})
	if err != nil {
		return nil, fmt.Errorf("read connections: %w", err)
	}
	return v.([]string), nil
}

// readAttempt bounds one ReadIndex round. Around an election a ReadIndex
// request can be dropped without an answer (a new leader that has not
// yet committed in its term, a follower forwarding to a leader that just
// stepped down); waiting out the caller's whole deadline on that one
// request would turn a blip of a few election ticks into a failed read.
const readAttempt = 500 * time.Millisecond

// retryRead runs a linearizable read in short attempts until one succeeds
// or ctx ends, and returns the last attempt's error.
func retryRead(ctx context.Context, read func(context.Context) error) error {
	for {
		actx, cancel := context.WithTimeout(ctx, readAttempt)
		err := read(actx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		if errors.Is(err, dragonboat.ErrShardNotFound) || errors.Is(err, dragonboat.ErrClosed) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(20 * time.Millisecond):
		}
	}
}
