package main

import "slices"

// baselines are the targets the checks set nacos-lockd against
// (grpc-noop: its CPU per pair; ZooKeeper: throughput, hand-offs,
// latency; raft-noop and h2grpc-noop: its floors), in the order they sit
// around it when a point runs.
var baselines = []string{"grpc-noop", "nacos-lockd", "zookeeper", "raft-noop", "h2grpc-noop"}

// runOrder is the order in which one round of a point runs targets. A
// ratio is only as good as the two figures under it, and on a shared
// machine a figure drifts within minutes: so nacos-lockd's baselines run
// right next to it (grpc-noop before it, ZooKeeper after it, then the two
// floors), where targets' order puts them (nacos-lockd's place), and every
// other round runs the whole list backwards, so that a drift across a
// round counts for a baseline in one round and against it in the next
// (A B B A). The other targets keep their order. Without nacos-lockd the
// list is only reversed every other round.
func runOrder(targets []string, round int) []string {
	out := slices.Clone(targets)
	if slices.Contains(targets, "nacos-lockd") {
		var block []string
		for _, t := range baselines {
			if slices.Contains(targets, t) {
				block = append(block, t)
			}
		}
		out = out[:0]
		for _, t := range targets {
			switch {
			case t == "nacos-lockd":
				out = append(out, block...)
			case !slices.Contains(block, t):
				out = append(out, t)
			}
		}
	}
	if round%2 == 1 {
		slices.Reverse(out)
	}
	return out
}
