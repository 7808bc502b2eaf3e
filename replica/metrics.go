package replica

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"nacos-lockd/statemachine"
)

// nodeMetrics are the replica's Prometheus series; nil records nothing.
type nodeMetrics struct {
	propose *prometheus.HistogramVec // op
	// proposeOf is propose's series by Op, looked up once: every
	// command's answer observes one, and hashing the label was a
	// measurable part of a hand-off's CPU.
	proposeOf      []prometheus.Observer
	leaderChanges  prometheus.Counter
	term           prometheus.Gauge
	isLeader       prometheus.Gauge
	snapshotBytes  prometheus.Gauge
	snapshotTime   prometheus.Histogram
	snapshotsSaved prometheus.Counter
	coalesced      prometheus.Histogram
}

func newNodeMetrics(reg prometheus.Registerer, n *Node) *nodeMetrics {
	if reg == nil {
		return nil
	}
	m := &nodeMetrics{
		propose: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "nacoslockd_raft_propose_duration_seconds", Help: "Propose-to-applied latency by operation.",
			Buckets: prometheus.ExponentialBuckets(0.0002, 2, 16)}, []string{"op"}),
		leaderChanges: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nacoslockd_raft_leader_changes_total", Help: "Leader changes this replica observed."}),
		term: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nacoslockd_raft_term", Help: "Raft term of the latest leader change observed."}),
		isLeader: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nacoslockd_raft_is_leader", Help: "1 when this replica leads the shard."}),
		snapshotBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "nacoslockd_snapshot_size_bytes", Help: "Size of the last snapshot archive written."}),
		snapshotTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nacoslockd_snapshot_duration_seconds", Help: "Time to write a snapshot archive.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}),
		snapshotsSaved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "nacoslockd_snapshots_total", Help: "Snapshot archives written (streamed to a follower or exported)."}),
		coalesced: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "nacoslockd_raft_coalesced_commands", Help: "Lock commands per Raft entry proposed by this node (group commit: every kind, not only renews).",
			Buckets: prometheus.ExponentialBuckets(1, 2, 9)}),
	}
	stat := func(f func(statemachine.Stats) float64) func() float64 {
		return func() float64 {
			st, err := n.Stats()
			if err != nil {
				return 0
			}
			return f(st)
		}
	}
	reg.MustRegister(m.propose, m.leaderChanges, m.term, m.isLeader, m.snapshotBytes, m.snapshotTime, m.snapshotsSaved, m.coalesced,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nacoslockd_locks_held", Help: "Held locks in the table."},
			stat(func(s statemachine.Stats) float64 { return float64(s.Held) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nacoslockd_lock_waiters", Help: "Queued waiters in the table."},
			stat(func(s statemachine.Stats) float64 { return float64(s.Queued) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nacoslockd_fencing_token_high_water", Help: "Highest fencing token ever granted."},
			stat(func(s statemachine.Stats) float64 { return float64(s.Fence) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nacoslockd_raft_applied_index", Help: "Index of the last applied entry."},
			stat(func(s statemachine.Stats) float64 { return float64(s.Applied) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "nacoslockd_raft_log_syncs_total",
			Help: "Records the Raft log wrote, one synced write each (a record holds one or more entries; a data dir on pebble's log counts none)."},
			func() float64 { return float64(n.logSyncs.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nacoslockd_cluster_level",
			Help: "Cluster level this replica has applied: the encodings every member reads (statemachine/DESIGN.md, Cluster level)."},
			func() float64 { return float64(n.ClusterLevel()) }),
		// Nacos's aliveLockCount, which Nacos never updates; ours is real.
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "nacos_monitor", Help: statemachine.NacosMonitorHelp,
			ConstLabels: prometheus.Labels{"module": "lock", "name": "aliveLockCount"}},
			stat(func(s statemachine.Stats) float64 { return float64(s.Held) })),
	)
	ops := statemachine.Ops() // in value order
	m.proposeOf = make([]prometheus.Observer, int(ops[len(ops)-1])+1)
	for _, op := range ops {
		m.proposeOf[op] = m.propose.WithLabelValues(op.String())
	}
	return m
}

func (m *nodeMetrics) proposed(op statemachine.Op, d time.Duration) {
	if m == nil {
		return
	}
	if int(op) < len(m.proposeOf) && m.proposeOf[op] != nil {
		m.proposeOf[op].Observe(d.Seconds())
		return
	}
	m.propose.WithLabelValues(op.String()).Observe(d.Seconds())
}

func (m *nodeMetrics) coalescedEntry(commands int) {
	if m != nil {
		m.coalesced.Observe(float64(commands))
	}
}

func (m *nodeMetrics) leader(term uint64, leading bool) {
	if m == nil {
		return
	}
	m.leaderChanges.Inc()
	m.term.Set(float64(term))
	if leading {
		m.isLeader.Set(1)
	} else {
		m.isLeader.Set(0)
	}
}

func (m *nodeMetrics) snapshot(size int64, d time.Duration) {
	if m == nil {
		return
	}
	m.snapshotsSaved.Inc()
	m.snapshotBytes.Set(float64(size))
	m.snapshotTime.Observe(d.Seconds())
}
