package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"nacos-lockd/bench/peers"
)

func procStat(cpu1Busy, cpu1Idle uint64) string {
	return fmt.Sprintf(`cpu  %d 0 0 %d 0 0 0 0 0 0
cpu0 100 0 0 900 0 0 0 0 0 0
cpu1 %d 0 0 %d 0 0 0 0 0 0
intr 1 2 3
`, 100+cpu1Busy, 900+cpu1Idle, cpu1Busy, cpu1Idle)
}

// awaitQuiet goes on once the CPU has been quiet for need intervals in a
// row (a busy one starts the count again), and gives up at its limit.
func TestAwaitQuiet(t *testing.T) {
	// Per interval on CPU 1: busy 90%, 5%, 50%, then 5% on end.
	steps := [][2]uint64{{0, 0}, {90, 10}, {95, 105}, {145, 155}, {150, 250}, {155, 345}, {160, 440}, {165, 535}}
	i := 0
	read := func() (string, error) {
		s := steps[min(i, len(steps)-1)]
		i++
		return procStat(s[0], s[1]), nil
	}
	_, quiet, err := awaitQuiet(context.Background(), read, peers.CPUSet{1}, 0.15, 3, time.Millisecond, time.Minute)
	if err != nil || !quiet {
		t.Fatalf("quiet %v %v", quiet, err)
	}
	if i != 7 { // the first sample, then busy, quiet, busy, quiet x3
		t.Fatalf("%d samples read, want 7", i)
	}

	busy := 0
	always := func() (string, error) { busy += 100; return procStat(uint64(busy), 0), nil }
	waited, quiet, err := awaitQuiet(context.Background(), always, peers.CPUSet{1}, 0.15, 3, time.Millisecond, 50*time.Millisecond)
	if err != nil || quiet || waited < 50*time.Millisecond {
		t.Fatalf("a CPU busy throughout: quiet %v after %v (%v), want a give-up at the limit", quiet, waited, err)
	}
}

// awaitIdle goes on once the processes' CPU time has stopped growing
// faster than frac of the wall time for need intervals in a row, and
// gives up at its limit while they stay busy.
func TestAwaitIdle(t *testing.T) {
	calls, used := 0, 0.0
	cpu := func() float64 {
		calls++
		if calls <= 4 { // the first sample, then three busy intervals
			used += 1 // a second of CPU per millisecond interval: busy
		}
		return used
	}
	_, idle, err := awaitIdle(context.Background(), cpu, 0.2, 3, time.Millisecond, time.Minute)
	if err != nil || !idle {
		t.Fatalf("idle %v %v", idle, err)
	}
	if calls != 7 { // the first sample, three busy, three idle
		t.Fatalf("%d samples read, want 7", calls)
	}

	busy := func() float64 { used += 1; return used }
	waited, idle, err := awaitIdle(context.Background(), busy, 0.2, 3, time.Millisecond, 50*time.Millisecond)
	if err != nil || idle || waited < 50*time.Millisecond {
		t.Fatalf("processes busy throughout: idle %v after %v (%v), want a give-up at the limit", idle, waited, err)
	}
}
