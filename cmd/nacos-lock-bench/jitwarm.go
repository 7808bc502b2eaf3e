package main

import (
	"context"
	"fmt"
	"time"
)

// jvmServer reports whether target t's server runs on a JVM. A JVM
// compiles its hot paths only after they have run for a while, and pinned
// to the servers' one core its compiler threads take that core from the
// server meanwhile. ZooKeeper alone, W2 c=16, consecutive 7 s points from
// a cold start: 273, 325, 448, 648, 841 hand-offs/s; a 60 s point from
// cold ended at ~900/s. The full run's first W1 c=1 round read it at less
// than half of the next two.
func jvmServer(t string) bool { return t == "zookeeper" || t == "nacos-3.1" }

// jitWarmed reports whether target t runs on a JVM, server or load
// program: the JVM servers, and both Java targets, whose load program is
// the suite's one Java driver (java.go).
func jitWarmed(t string) bool { return jvmServer(t) || isJavaTarget(t) }

// jvmPointWarmup is the least warm-up of a point against a JVM server.
// Paused while the other targets ran, ZooKeeper came back at about half
// its W2 hand-offs/s and took ~10 s of load to regain them, JIT warm-up
// or not (W2 c=16 after 60 s of warm-up: 452, 605, 716 with the suite's
// 2 s per point; 943, 841, 767 with 10 s). Both Java targets get it, so
// the Java table compares like with like.
const jvmPointWarmup = 10 * time.Second

// pointWarmup is the warm-up of a point against target t: the longer one
// wherever a JVM is involved, server or load program.
func (s *suite) pointWarmup(t string) time.Duration {
	if jitWarmed(t) {
		return max(s.warmup, jvmPointWarmup)
	}
	return s.warmup
}

// jitWarmStep is one unmeasured point run before the first round.
type jitWarmStep struct {
	target, workload string
}

// jitWarmSteps lists the unmeasured points that warm the JIT of every
// JVM server among targets, and of the Java driver, for the W1 and W2
// workloads the suite measures (the code paths those points run are the
// ones to compile).
func jitWarmSteps(targets []string, wl map[string]bool) []jitWarmStep {
	var steps []jitWarmStep
	for _, t := range targets {
		if !jitWarmed(t) {
			continue
		}
		for _, w := range []string{"w1", "w2"} {
			if ok, _ := supports(t, w); wl[w] && ok {
				steps = append(steps, jitWarmStep{t, w})
			}
		}
	}
	return steps
}

// warmJITs runs steps at 16 clients for d each and discards what they
// measure. A step that fails is reported and the suite goes on: the points
// that follow report their own failures.
func (s *suite) warmJITs(ctx context.Context, steps []jitWarmStep, d time.Duration) error {
	for _, st := range steps {
		if s.skipped[st.target] != "" {
			continue
		}
		fmt.Fprintf(s.stderr, "== warming %s's JIT: %s c=16 for %s, not measured\n", st.target, st.workload, d)
		if _, err := s.pointFor(ctx, st.target, st.workload, 16, 0, d); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fmt.Fprintf(s.stderr, "-- %s JIT warm-up (%s) failed: %v\n", st.target, st.workload, err)
		}
	}
	return nil
}
