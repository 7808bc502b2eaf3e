package replica

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"nacos-lockd/statemachine"
)

// TestProposedObservesTheOpsSeries checks that the series looked up once
// per Op are the ones /metrics shows under that op's label, and that an
// Op without one is still counted under its name.
func TestProposedObservesTheOpsSeries(t *testing.T) {
	m := newNodeMetrics(prometheus.NewRegistry(), &Node{})
	m.proposed(statemachine.OpAcquire, time.Millisecond)
	m.proposed(statemachine.OpAcquire, time.Millisecond)
	m.proposed(statemachine.OpClaim, time.Millisecond)
	unknown := statemachine.Ops()[len(statemachine.Ops())-1] + 7
	m.proposed(unknown, time.Millisecond)
	for _, tc := range []struct {
		op   string
		want uint64
	}{
		{statemachine.OpAcquire.String(), 2},
		{statemachine.OpClaim.String(), 1},
		{statemachine.OpRelease.String(), 0},
		{unknown.String(), 1},
	} {
		var d dto.Metric
		if err := m.propose.WithLabelValues(tc.op).(prometheus.Histogram).Write(&d); err != nil {
			t.Fatal(err)
		}
		if got := d.GetHistogram().GetSampleCount(); got != tc.want {
			t.Errorf("op %s: %d observations, want %d", tc.op, got, tc.want)
		}
	}
}

// TestLogSyncsCounted: /metrics counts our log's synced writes under
// either engine, one per record, so a benchmark can divide them by its
// operations; pebble's log counts none.
func TestLogSyncsCounted(t *testing.T) {
	forEachEngine(t, func(t *testing.T, engine string) {
		reg := prometheus.NewRegistry()
		env := &nodeEnv{engine: engine, dir: t.TempDir(), addr: freeAddr(t), metrics: reg}
		n, db := env.start(t)
		defer db.Close()
		defer n.Close()
		before := logSyncs(t, reg)
		const commands = 20
		for i := range commands {
			propose(t, n, acq(N, fmt.Sprint("k", i), "o", "c1", time.Now().UnixMilli(), 60000, 0))
		}
		// One proposer, one command at a time: every entry is written
		// and synced before the next is proposed, so no two share a
		// record. The engine writes nothing else; Raft may write records
		// of its own besides (states, the applied index).
		got := logSyncs(t, reg) - before
		if got < commands || engine == EngineSolo && got != commands {
			t.Fatalf("%s: %v synced writes for %d entries proposed one after another", engine, got, commands)
		}
	})
	t.Run("pebble", func(t *testing.T) {
		reg := prometheus.NewRegistry()
		env := &nodeEnv{engine: EngineRaft, raftLog: LogPebble, dir: t.TempDir(), addr: freeAddr(t), metrics: reg}
		n, db := env.start(t)
		defer db.Close()
		defer n.Close()
		propose(t, n, acq(N, "k", "o", "c1", time.Now().UnixMilli(), 60000, 0))
		if got := logSyncs(t, reg); got != 0 {
			t.Fatalf("pebble's log counted %v synced writes of ours", got)
		}
	})
}

func logSyncs(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "nacoslockd_raft_log_syncs_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("no nacoslockd_raft_log_syncs_total in /metrics")
	return 0
}
