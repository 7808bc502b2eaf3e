package replica

import (
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
