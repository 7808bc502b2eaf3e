package main

import (
	"strings"
	"testing"

	"nacos-lockd/bench/load"
)

func TestJavaTableRatiosAreOursOverNacos(t *testing.T) {
	reps := []load.Report{
		{Target: "nacos-lockd-java", Workload: "w1", Clients: 16, Ops: 100, OpsPerSec: 600, P50Ms: 20, P99Ms: 40, ServerCPUPerOp: 100},
		{Target: "nacos-3.1", Workload: "w1", Clients: 16, Ops: 100, OpsPerSec: 300, P50Ms: 50, P99Ms: 60, ServerCPUPerOp: 300, Errors: 2},
		{Target: "nacos-lockd-java", Workload: "w2", Clients: 2, Ops: 10, OpsPerSec: 100, P50Ms: 5, P99Ms: 9, ServerCPUPerOp: 50},
		// Points of the main table never leak into this one.
		{Target: "nacos-lockd", Workload: "w1", Clients: 16, Ops: 100, OpsPerSec: 9999, P50Ms: 1, P99Ms: 2},
	}
	got := javaTable(reps, map[string]string{})
	for _, want := range []string{
		"| W1 c=16 | 600 | 300 | 2.00x | 20.0 | 50.0 | 2.50x | 1.50x | 3.00x | 0, 2 |",
		"| W2 c=2 | 100 | n/a | n/a | 5 | n/a | n/a | n/a | n/a | 0, 0 |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "9999") {
		t.Errorf("a Go-client point leaked into the Java table:\n%s", got)
	}
	// Nacos alone (--targets nacos-3.1) still gets its rows.
	only := javaTable([]load.Report{{Target: "nacos-3.1", Workload: "w1", Clients: 1, Ops: 5, OpsPerSec: 50, P50Ms: 12, P99Ms: 20}}, nil)
	if want := "| W1 c=1 | n/a | 50.0 | n/a | n/a | 12.0 |"; !strings.Contains(only, want) {
		t.Errorf("Nacos-only table lacks %q:\n%s", want, only)
	}
	if s := javaTable(nil, map[string]string{"nacos-3.1": "no java"}); !strings.Contains(s, "skipped (no java)") {
		t.Errorf("skipped run: %q", s)
	}
}

func TestJavaTargetsRunW1AndW2Only(t *testing.T) {
	for _, tc := range []struct {
		target, workload string
		want             bool
	}{
		{"nacos-3.1", "w1", true}, {"nacos-3.1", "w2", true}, {"nacos-3.1", "w3", false},
		{"nacos-lockd-java", "w5", false}, {"nacos", "w5", true}, {"grpc-noop", "w2", false},
	} {
		if got, _ := supports(tc.target, tc.workload); got != tc.want {
			t.Errorf("supports(%s, %s) = %v, want %v", tc.target, tc.workload, got, tc.want)
		}
	}
}
