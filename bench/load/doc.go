// Package load is the measuring core of nacos-lock-bench and of the peer
// drivers that live in their own modules (bench/etcd): it runs N client
// loops for a warm-up and a measured duration, shows progress, and turns
// what the loops recorded into a Report (ops/s, latency percentiles, server
// CPU and RSS, a per-second timeline for the chart).
//
// It imports nothing heavier than the standard library and x/image, so a
// peer module can use it without pulling the server's dependencies.
package load
