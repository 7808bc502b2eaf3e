package main

import (
	"slices"
	"testing"
	"time"
)

func TestJITWarmStepsCoverEveryJVMAndOnlyThem(t *testing.T) {
	all := []string{"nacos-lockd", "nacos-lockd-3", "nacoslock", "etcd-mutex", "redis-fsync-always", "zookeeper",
		"grpc-noop", "raft-noop", "nacos-lockd-java", "nacos-3.1"}
	got := jitWarmSteps(all, map[string]bool{"w1": true, "w2": true, "w3": true})
	// nacos-lockd-java's server is ours, but its load program is the
	// Java driver, a JVM.
	want := []jitWarmStep{{"zookeeper", "w1"}, {"zookeeper", "w2"}, {"nacos-lockd-java", "w1"}, {"nacos-lockd-java", "w2"},
		{"nacos-3.1", "w1"}, {"nacos-3.1", "w2"}}
	if !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	// Only the workloads the suite measures are warmed.
	if got := jitWarmSteps(all, map[string]bool{"w2": true}); !slices.Equal(got, []jitWarmStep{{"zookeeper", "w2"}, {"nacos-lockd-java", "w2"}, {"nacos-3.1", "w2"}}) {
		t.Fatalf("W2 only: %v", got)
	}
	if got := jitWarmSteps(all, map[string]bool{"w3": true, "w4": true}); len(got) != 0 {
		t.Fatalf("no W1 or W2: %v", got)
	}
	if got := jitWarmSteps([]string{"nacos-lockd", "etcd-v3lock"}, map[string]bool{"w1": true, "w2": true}); len(got) != 0 {
		t.Fatalf("no JVM server among the targets: %v", got)
	}
}

func TestJVMServersGetTheLongerPointWarmup(t *testing.T) {
	s := &suite{warmup: 2 * time.Second}
	for _, tc := range []struct {
		target string
		want   time.Duration
	}{
		{"zookeeper", jvmPointWarmup},
		{"nacos-3.1", jvmPointWarmup},
		{"nacos-lockd-java", jvmPointWarmup}, // the Java table's other side
		{"nacos-lockd", 2 * time.Second},
		{"etcd-mutex", 2 * time.Second},
		{"redis-fsync-always", 2 * time.Second},
	} {
		if got := s.pointWarmup(tc.target); got != tc.want {
			t.Errorf("%s: warm-up %s, want %s", tc.target, got, tc.want)
		}
	}
	// A longer warm-up asked for applies to every target.
	s.warmup = time.Minute
	if got := s.pointWarmup("zookeeper"); got != time.Minute {
		t.Errorf("zookeeper with --warmup 1m: %s", got)
	}
}
