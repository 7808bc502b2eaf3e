package server

import (
	"context"
	"io"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/compat"
)

// Config is everything a server needs, already parsed and checked
// (cmd/nacos-lockd parses flags, environment and properties into it).
type Config struct {
	Self     compat.Member   // this node
	Members  []compat.Member // cluster.conf, or just Self
	Cluster  bool            // started with a cluster.conf
	Join     bool            // join an existing cluster as a new member
	DataDir  string
	Lock     compat.LockSettings
	Auth     compat.AuthSettings
	TLS      compat.TLSSettings
	Identity [2]string // nacos.core.auth.server.identity.key/value: lets nodes join a cluster with auth on
	// CoalesceWindow is replica.RaftConfig.CoalesceWindow: how long
	// renews are collected into one Raft entry; 0 = off.
	CoalesceWindow time.Duration
	// RaftLog is replica.RaftConfig.RaftLog: the Raft log a new data dir
	// keeps.
	RaftLog string
	// RaftEngine is the engine a new single-node data dir gets
	// (replica.ChooseEngine).
	RaftEngine string
	// Transport is gateway.Config.Transport: the SDK port's gRPC server.
	Transport string
	// Profiling is admin.Config.Profiling: /debug/pprof/ on the main port.
	Profiling bool

	// Version and Commit are logged at start and printed in the banner.
	Version, Commit string
	// Log is the root logger; Banner, if set, gets the two ready lines
	// for the person who started the server (stdout).
	Log    zerolog.Logger
	Banner io.Writer

	// Install, if set, runs before storage opens, on the data dir (the
	// --import-nacos install into an empty data dir). A table it installs
	// with an import or restore marker is sealed once the node is ready.
	Install func() error
	// Names, in a cluster, waits for this node's own DNS name before Raft
	// listens, and watches the other members' names while the server runs.
	// Nil: no waiting, no watch.
	Names Names
	// Hooks are the chaos suite's test hooks (-tags testhooks); nil: none.
	Hooks Hooks

	// trace, set by this package's tests, records the lifecycle steps.
	trace func(step string)
}

// Names is the DNS side of a cluster member's start (cmd/nacos-lockd's
// names.go): dragonboat listens on the addresses its own name resolves
// to, and dials the others' names per connection.
type Names interface {
	// WaitOwn returns once this node's own name resolves, or with an
	// error when ctx ends first.
	WaitOwn(ctx context.Context) error
	// Watch logs the other members' names as they resolve, until ctx ends.
	Watch(ctx context.Context)
}

// Hooks are what the test hooks (--test-hooks, -tags testhooks only) take
// from the server: the gateway's clock, set before the node starts, and
// the node, for transfer-leader.
type Hooks interface {
	Clock() func() time.Time
	AttachNode(n LeaderTransferer)
}

// LeaderTransferer is the Raft node as the test hooks see it.
type LeaderTransferer interface {
	TransferLeadership(ctx context.Context) error
}

func (c Config) mode() string {
	if c.Cluster {
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
func (c Config) bootstrapReplicaID() uint64 {
	if !c.Cluster {
		return 1
	}
	return c.Self.ReplicaID()
}

// coalesceWindow maps the setting (0 = off) to RaftConfig's (negative = off).
func coalesceWindow(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

func (c Config) step(s string) {
	if c.trace != nil {
		c.trace(s)
	}
}
