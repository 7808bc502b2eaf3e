package main

import (
	"slices"
	"strings"
	"testing"
)

// nacos-lockd's baselines run next to it, the rest keep their order, and
// odd rounds run backwards; every target runs exactly once a round.
func TestRunOrder(t *testing.T) {
	all := strings.Split("nacos-lockd,nacos-lockd-3,nacoslock,etcd-mutex,etcd-v3lock,redis-fsync-always,redis-fsync-off,zookeeper,grpc-noop,h2grpc-noop,raft-noop,nacos-lockd-java,nacos-3.1", ",")
	given := slices.Clone(all)
	want := strings.Split("grpc-noop,nacos-lockd,zookeeper,raft-noop,h2grpc-noop,nacos-lockd-3,nacoslock,etcd-mutex,etcd-v3lock,redis-fsync-always,redis-fsync-off,nacos-lockd-java,nacos-3.1", ",")
	for round := range 4 {
		got := runOrder(all, round)
		w := slices.Clone(want)
		if round%2 == 1 {
			slices.Reverse(w)
		}
		if !slices.Equal(got, w) {
			t.Fatalf("round %d: %v, want %v", round, got, w)
		}
	}
	// Where nacos-lockd sits in the list is where its block goes.
	got := runOrder([]string{"etcd-mutex", "zookeeper", "nacos-lockd", "redis-fsync-off", "grpc-noop"}, 0)
	if w := []string{"etcd-mutex", "grpc-noop", "nacos-lockd", "zookeeper", "redis-fsync-off"}; !slices.Equal(got, w) {
		t.Fatalf("got %v, want %v", got, w)
	}
	// Without nacos-lockd: the given order, backwards every other round.
	some := []string{"zookeeper", "etcd-mutex", "grpc-noop"}
	if got := runOrder(some, 0); !slices.Equal(got, some) {
		t.Fatalf("round 0: %v", got)
	}
	if got := runOrder(some, 1); !slices.Equal(got, []string{"grpc-noop", "etcd-mutex", "zookeeper"}) {
		t.Fatalf("round 1: %v", got)
	}
	// The caller's list is not changed.
	if !slices.Equal(all, given) {
		t.Fatalf("targets changed: %v", all)
	}
}
