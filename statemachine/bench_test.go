package statemachine

import (
	"fmt"
	"testing"
)

// BenchmarkApplyPair measures an uncontended ACQUIRE and RELEASE applied
// to a table that already holds others locks (the W1 pattern beside the W3
// population): the lookups and index updates a command costs, by size.
func BenchmarkApplyPair(b *testing.B) {
	for _, held := range []int{64, 100000, 1000000} {
		b.Run(fmt.Sprintf("held=%d", held), func(b *testing.B) {
			t := NewTable()
			var idx uint64
			apply := func(c Command) Result {
				idx++
				return t.Apply(idx, c)
			}
			for i := range held {
				c := i % 256
				apply(Command{Op: OpAcquire, NowMs: 1, Kind: KindNonReentrant, Key: fmt.Sprintf("bench-w3-1764492000000000000-%d", i),
					Owner: fmt.Sprintf("bench-%d", c), ConnID: fmt.Sprintf("1764492000000_127.0.0.1_%d_1", 40000+c), LeaseMs: 1 << 40})
				if i%64 == 0 {
					t.DiscardChanges()
				}
			}
			keys := make([]string, 64)
			for i := range keys {
				keys[i] = fmt.Sprintf("w1-%d", i)
			}
			t.DiscardChanges()
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				k := keys[i%len(keys)]
				acq := Command{Op: OpAcquire, NowMs: int64(2 + i), Kind: KindReentrant, Key: k, Owner: "o", ConnID: "c", LeaseMs: 30000}
				if r := apply(acq); !r.Success() {
					b.Fatal(r.Code)
				}
				rel := acq
				rel.Op = OpRelease
				if r := apply(rel); !r.Success() {
					b.Fatal(r.Code)
				}
				if i%8 == 0 {
					t.DiscardChanges()
				}
			}
		})
	}
}

// BenchmarkApplyHandOff measures a W2 hand-off on one lock with 16
// clients: the holder's RELEASE (which grants the head of the queue) and
// its ACQUIRE queueing again behind the others.
func BenchmarkApplyHandOff(b *testing.B) {
	const clients = 16
	t := NewTable()
	var idx uint64
	apply := func(c Command) Result {
		idx++
		return t.Apply(idx, c)
	}
	acquire := func(i int, now int64) Command {
		return Command{Op: OpAcquire, NowMs: now, Kind: KindNonReentrant, Key: "w2", Owner: fmt.Sprintf("owner-%d", i),
			ConnID: fmt.Sprintf("1764492000000_127.0.0.1_%d_1", 40000+i), LeaseMs: 30000, WaitMs: 30000}
	}
	for i := range clients {
		apply(acquire(i, 1))
	}
	t.DiscardChanges()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		holder := i % clients
		rel := acquire(holder, int64(2+i))
		rel.Op, rel.WaitMs = OpRelease, 0
		if r := apply(rel); !r.Success() {
			b.Fatal(r.Code)
		}
		if r := apply(acquire(holder, int64(2+i))); r.Success() || r.WaitPosition < 0 {
			b.Fatalf("queueing again: %+v", r)
		}
		if i%8 == 0 {
			t.DiscardChanges()
		}
	}
}
