package main

import (
	"context"
	"time"

	"nacos-lockd/bench/load"
	"nacos-lockd/bench/peers"
)

// awaitQuiet waits until cpus have been busy less than frac of the time
// in need consecutive intervals, or until limit has passed (quiet false).
// The suite starts every server at once, and the JVM peers (ZooKeeper, a
// real Nacos) go on compiling and collecting on the servers' CPU for a
// while after they answer: the first points measured in that time read
// slower for every target (2026-12-04: nacos-lockd's first W1 c=1 round
// 2.96 ms p50, its third 0.54).
func awaitQuiet(ctx context.Context, read func() (string, error), cpus peers.CPUSet, frac float64, need int, interval, limit time.Duration) (time.Duration, bool, error) {
	return awaitBelow(ctx, func() (float64, float64, error) {
		s, err := read()
		if err != nil {
			return 0, 0, err
		}
		busy, total, err := load.CPUTimes(s, cpus)
		return float64(busy), float64(total), err
	}, frac, need, interval, limit)
}

// awaitIdle waits until processes have used less than frac of a core in
// need consecutive intervals, or until limit has passed (idle false).
// cpuSeconds reads their CPU time so far (load.CPUSeconds).
func awaitIdle(ctx context.Context, cpuSeconds func() float64, frac float64, need int, interval, limit time.Duration) (time.Duration, bool, error) {
	start := time.Now()
	return awaitBelow(ctx, func() (float64, float64, error) {
		return cpuSeconds(), time.Since(start).Seconds(), nil
	}, frac, need, interval, limit)
}

// awaitBelow samples a busy and a total count every interval until busy
// has grown by less than frac of total in need consecutive intervals (a
// busier one starts the count again), or until limit has passed.
func awaitBelow(ctx context.Context, sample func() (busy, total float64, err error), frac float64, need int, interval, limit time.Duration) (time.Duration, bool, error) {
	start := time.Now()
	b0, t0, err := sample()
	if err != nil {
		return 0, false, err
	}
	for run := 0; run < need; {
		if time.Since(start) >= limit {
			return time.Since(start), false, nil
		}
		select {
		case <-ctx.Done():
			return time.Since(start), false, ctx.Err()
		case <-time.After(interval):
		}
		b1, t1, err := sample()
		if err != nil {
			return time.Since(start), false, err
		}
		if t1 > t0 && b1-b0 < frac*(t1-t0) {
			run++
		} else {
			run = 0
		}
		b0, t0 = b1, t1
	}
	return time.Since(start), true, nil
}
