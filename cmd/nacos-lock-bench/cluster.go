package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"nacos-lockd/bench/load"
)

// clusterTarget is the suite's three-node nacos-lockd cluster (issue 13
// item 8: its W1 c=64 pairs/s against the single node's in the same run).
const clusterTarget = "nacos-lockd-3"

// serverList splits --server's comma-separated addresses (a Nacos
// serverAddr lists a cluster's nodes that way).
func serverList(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// nacosCluster runs w1 or w2 against a running nacos-lockd cluster given
// by its nodes' main-port addresses, through the same client as a single
// node (nacosLocker), client i on node i mod n: the even spread Nacos
// clients with a multi-address serverAddr make, each picking one node of
// the list. Any node serves lock requests: a follower proposes through
// Raft, which forwards the proposal to the leader. Server CPU and RSS are
// summed over every node's process.
func nacosCluster(ctx context.Context, o options, spec load.Spec, addrs []string) (load.Report, error) {
	if o.workload != "w1" && o.workload != "w2" {
		return load.Report{}, fmt.Errorf("several --server addresses (a cluster) run w1 and w2, not %s", o.workload)
	}
	if o.spawn != "" {
		return load.Report{}, errors.New("--spawn starts one node: with several --server addresses, start the cluster first (the suite's nacos-lockd-3 target does)")
	}
	grpcAddrs := make([]string, len(addrs))
	ports := make([]int, len(addrs))
	for i, a := range addrs {
		host, port, err := net.SplitHostPort(a)
		if err != nil {
			return load.Report{}, fmt.Errorf("--server %q: %w", a, err)
		}
		p, err := strconv.Atoi(port)
		if err != nil {
			return load.Report{}, fmt.Errorf("--server %q: bad port", a)
		}
		ports[i], grpcAddrs[i] = p, net.JoinHostPort(host, strconv.Itoa(p+1000))
	}
	spec.Target = fmt.Sprintf("nacos-lockd-%d", len(addrs))
	spec.PIDs = o.pids
	if len(spec.PIDs) == 0 {
		for _, p := range ports {
			if pid := load.PIDListening(p + 1000); pid != 0 {
				spec.PIDs = append(spec.PIDs, pid)
			}
		}
	}
	rep, err := w12(ctx, o, spec, dialNacosAll(grpcAddrs, o.lease))
	rep.Notes = append(rep.Notes, fmt.Sprintf("%d-node cluster %s: client i on node i mod %d; server CPU and RSS summed over pids %v",
		len(addrs), strings.Join(addrs, ","), len(addrs), spec.PIDs))
	if len(spec.PIDs) != len(addrs) {
		rep.Notes = append(rep.Notes, fmt.Sprintf("server CPU and RSS are of %d process(es), not of all %d nodes", len(spec.PIDs), len(addrs)))
	}
	return rep, err
}
