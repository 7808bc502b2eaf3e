package control

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/statemachine"
)

// Table is everything the control loops ask of the replicated lock table.
type Table interface {
	Propose(ctx context.Context, cmd statemachine.Command) (statemachine.Result, error)
	// IsLeader reports whether this node leads: the reaper and the node
	// monitor act on the leader only.
	IsLeader() bool
	// Expired lists leases that ended before nowMs (the local replica's
	// view; EXPIRE re-checks in apply).
	Expired(nowMs int64, limit int) ([]statemachine.ExpiredLease, error)
	// Nodes lists the node ids whose connections the table references
	// (connid.NodeOf; "" for connections no node of ours minted).
	Nodes() ([]string, error)
	// Conns lists one node's connections the table references.
	Conns(node string) ([]string, error)
}

// Config configures the loops. Durations must be set (the gateway's
// defaults fill them).
type Config struct {
	NodeID            string        // this node's id: its connections are never cleaned as a dead node's
	ScanInterval      time.Duration // between reaper scans
	RequestTimeout    time.Duration // bounds each proposal
	DisconnectGrace   time.Duration // before a closed connection is cleaned up
	NodeGrace         time.Duration // a node unreachable this long has its connections cleaned
	NodeCheckInterval time.Duration // between node checks
	// PeerAlive reports whether another node answers; nil turns the node
	// monitor off (a single node).
	PeerAlive func(ctx context.Context, node string) bool
	// Now is the clock stamped into commands; nil means time.Now.
	Now    func() time.Time
	Events Events
}

// Events are told what the loops did; any may be nil.
type Events struct {
	Expired func()              // the reaper ended a lease
	Cleaned func(reason string) // a cleanup committed: "disconnect" or "node_down"
	Scanned func(now time.Time) // each reaper wake-up, leader or not
}

func (e Events) expired() {
	if e.Expired != nil {
		e.Expired()
	}
}

func (e Events) cleaned(reason string) {
	if e.Cleaned != nil {
		e.Cleaned(reason)
	}
}

func (e Events) scanned(now time.Time) {
	if e.Scanned != nil {
		e.Scanned(now)
	}
}

// Loops runs the leader-side control loops over one table.
type Loops struct {
	cfg   Config
	log   zerolog.Logger
	table Table
	now   func() time.Time

	stopping atomic.Bool   // Stop called
	stop     chan struct{} // closed by Stop
	stopOnce sync.Once
	bg       sync.WaitGroup
}

// New returns the loops for table; Start runs them.
func New(cfg Config, table Table, log zerolog.Logger) *Loops {
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Loops{cfg: cfg, log: log, table: table, now: now, stop: make(chan struct{})}
}

// Start runs the expiry reaper and the dead-node monitor until Stop.
func (s *Loops) Start() {
	s.bg.Add(2)
	go func() {
		defer s.bg.Done()
		s.reap()
	}()
	go func() {
		defer s.bg.Done()
		s.monitorNodes()
	}()
}

// Stop ends the loops and the pending cleanups: nothing new is proposed.
// It does not wait (see Wait).
func (s *Loops) Stop() {
	s.stopOnce.Do(func() {
		s.stopping.Store(true)
		close(s.stop)
	})
}

// Wait returns once every loop and pending cleanup has ended.
func (s *Loops) Wait() { s.bg.Wait() }

// ScheduleCleanup proposes CLEANUP_CONNECTION for a closed connection
// after the disconnect grace (scheduleCleanup).
func (s *Loops) ScheduleCleanup(connID string) { s.scheduleCleanup(connID) }
