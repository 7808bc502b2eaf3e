package statemachine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/lni/dragonboat/v4"
	"github.com/lni/dragonboat/v4/config"
	dblogger "github.com/lni/dragonboat/v4/logger"
	"github.com/lni/dragonboat/v4/raftio"
	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/rs/zerolog"

	"nacos-lockd/storage"
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

	RTTMillisecond     uint64 // default 1 (loopback)
	ElectionRTT        uint64 // default 10
	HeartbeatRTT       uint64 // default 1
	SnapshotEntries    uint64 // default 10000
	CompactionOverhead uint64 // default 5000
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
	set(&d.SnapshotEntries, 10000)
	set(&d.CompactionOverhead, 5000)
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

// Node is this process's replica of the lock table.
type Node struct {
	nh  *dragonboat.NodeHost
	cfg RaftConfig
	log zerolog.Logger
}

// Start opens the Raft replica over db. notify receives grants to waiters
// (see Notifier). The caller closes the node before closing db.
func Start(cfg RaftConfig, db *storage.DB, notify Notifier, log zerolog.Logger) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	setDragonboatLogger(log)
	n := &Node{cfg: cfg, log: log}
	nhc := config.NodeHostConfig{
		NodeHostDir:       cfg.NodeHostDir,
		WALDir:            cfg.NodeHostDir,
		RTTMillisecond:    cfg.RTTMillisecond,
		RaftAddress:       cfg.RaftAddress,
		RaftEventListener: leaderLogger{log: log},
		Expert: config.ExpertConfig{
			LogDB: config.GetSmallMemLogDBConfig(), // lock commands are tiny
		},
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
		return newDiskSM(db, notify, log.With().Str("component", "statemachine").Logger())
	}
	if err := nh.StartOnDiskReplica(members, cfg.Join, create, rc); err != nil {
		nh.Close()
		return nil, fmt.Errorf("start raft replica: %w", err)
	}
	return n, nil
}

// Close stops the replica. Proposals in flight fail with ErrUnavailable.
func (n *Node) Close() { n.nh.Close() }

// ReplicaID is this node's replica id.
func (n *Node) ReplicaID() uint64 { return n.cfg.ReplicaID }

// Propose commits cmd and returns its result. ctx must carry a deadline.
func (n *Node) Propose(ctx context.Context, cmd Command) (Result, error) {
	res, err := n.nh.SyncPropose(ctx, n.nh.GetNoOPSession(n.cfg.ShardID), cmd.Encode())
	if err != nil {
		return Result{}, fmt.Errorf("propose %s: %w: %w", cmd.Op, ErrUnavailable, err)
	}
	r, err := decodeResult(res.Data)
	if err != nil {
		return Result{}, fmt.Errorf("decode %s result: %w", cmd.Op, err)
	}
	return r, nil
}

// IsLeader reports whether this replica currently leads the shard.
func (n *Node) IsLeader() bool {
	id, _, ok, err := n.nh.GetLeaderID(n.cfg.ShardID)
	return err == nil && ok && id == n.cfg.ReplicaID
}

// WaitReady blocks until the shard has a leader and this replica has
// applied everything committed before the call (a linearizable read).
func (n *Node) WaitReady(ctx context.Context) error {
	poll := time.NewTicker(10 * time.Millisecond)
	defer poll.Stop()
	var last error
	for {
		if _, _, ok, err := n.nh.GetLeaderID(n.cfg.ShardID); err == nil && ok {
			rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, last = n.nh.SyncRead(rctx, n.cfg.ShardID, StatsQuery{})
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
func (n *Node) Stats() (Stats, error) {
	v, err := n.nh.StaleRead(n.cfg.ShardID, StatsQuery{})
	if err != nil {
		return Stats{}, fmt.Errorf("read stats: %w", err)
	}
	return v.(Stats), nil
}

// Lock reads one lock from the local replica (possibly stale).
func (n *Node) Lock(kind Kind, key string) (LockInfo, error) {
	v, err := n.nh.StaleRead(n.cfg.ShardID, LockQuery{Kind: kind, Key: key})
	if err != nil {
		return LockInfo{}, fmt.Errorf("read lock: %w", err)
	}
	return v.(LockInfo), nil
}

// Expired lists leases that ended before nowMs according to the local
// replica. Only the leader's reaper calls it, and EXPIRE re-checks in apply.
func (n *Node) Expired(nowMs int64, limit int) ([]ExpiredLease, error) {
	v, err := n.nh.StaleRead(n.cfg.ShardID, ExpiredQuery{NowMs: nowMs, Limit: limit})
	if err != nil {
		return nil, fmt.Errorf("read expired leases: %w", err)
	}
	return v.([]ExpiredLease), nil
}

type leaderLogger struct{ log zerolog.Logger }

func (l leaderLogger) LeaderUpdated(info raftio.LeaderInfo) {
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

// dbLogAdapter maps dragonboat's levels down one notch: it logs routine
// elections and start-up notes as warnings and per-replica chatter as
// info. Leader changes reach our own log through leaderLogger.
type dbLogAdapter struct{ pkg string }

func (a dbLogAdapter) l() *zerolog.Logger           { return dbLog.Load() }
func (a dbLogAdapter) SetLevel(dblogger.LogLevel)   {}
func (a dbLogAdapter) Debugf(f string, args ...any) { a.l().Trace().Str("pkg", a.pkg).Msgf(f, args...) }
func (a dbLogAdapter) Infof(f string, args ...any)  { a.l().Debug().Str("pkg", a.pkg).Msgf(f, args...) }
func (a dbLogAdapter) Warningf(f string, args ...any) {
	a.l().Info().Str("pkg", a.pkg).Msgf(f, args...)
}
func (a dbLogAdapter) Errorf(f string, args ...any) { a.l().Error().Str("pkg", a.pkg).Msgf(f, args...) }
func (a dbLogAdapter) Panicf(f string, args ...any) { a.l().Panic().Str("pkg", a.pkg).Msgf(f, args...) }
