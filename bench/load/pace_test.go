package load

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// fakeClock moves only when told to: by SleepUntil, and by the fake
// locker's service time.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }
func (c *fakeClock) SleepUntil(_ context.Context, t time.Time) {
	if t.After(c.now) {
		c.now = t
	}
}

// slowLocker takes service per pair (half on each call) on the fake
// clock, records when each pair started and ends the run after n pairs.
type slowLocker struct {
	clk     *fakeClock
	service time.Duration
	starts  []time.Time
	n       int
	cancel  context.CancelFunc
}

func (l *slowLocker) Acquire(context.Context, string, bool) (Grant, error) {
	l.starts = append(l.starts, l.clk.now)
	l.clk.now = l.clk.now.Add(l.service / 2)
	return Grant{}, nil
}

func (l *slowLocker) Release(context.Context, string) error {
	l.clk.now = l.clk.now.Add(l.service / 2)
	if len(l.starts) >= l.n {
		l.cancel()
	}
	return nil
}

func (l *slowLocker) Close() error { return nil }

func measuringShard() *Shard {
	r := &Recorder{}
	r.start.Store(time.Now().UnixNano())
	r.measuring.Store(true)
	return &Shard{r: r}
}

func runPaced(t *testing.T, service time.Duration, n int) (*slowLocker, []time.Duration, time.Time) {
	t.Helper()
	t0 := time.Unix(1000, 0)
	clk := &fakeClock{now: t0}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	l := &slowLocker{clk: clk, service: service, n: n, cancel: cancel}
	sh := measuringShard()
	// Client 1 of 4 at 100 ops/s in total: every 40 ms, from 10 ms on.
	pacedPairs(ctx, clk, NewPacer(t0, 1, 4, 100), l, "k", sh)
	if len(sh.lat) != n {
		t.Fatalf("%d pairs recorded, want %d", len(sh.lat), n)
	}
	return l, sh.lat, t0
}

func TestPacedPairsFollowTheSchedule(t *testing.T) {
	l, lat, t0 := runPaced(t, 2*time.Millisecond, 6)
	for k, s := range l.starts {
		if want := t0.Add(10*time.Millisecond + time.Duration(k)*40*time.Millisecond); !s.Equal(want) {
			t.Errorf("pair %d started at +%v, want +%v", k, s.Sub(t0), want.Sub(t0))
		}
	}
	for k, d := range lat {
		if d != 2*time.Millisecond {
			t.Errorf("pair %d latency %v, want the 2ms service time", k, d)
		}
	}
}

func TestPacedPairsCountTheirLag(t *testing.T) {
	// 100 ms per pair against a 40 ms period: the client falls behind,
	// starts each pair as soon as the last ends, and each latency runs
	// from the scheduled start: 100 ms + 60 ms per pair behind.
	l, lat, t0 := runPaced(t, 100*time.Millisecond, 5)
	for k, s := range l.starts {
		if want := t0.Add(10*time.Millisecond + time.Duration(k)*100*time.Millisecond); !s.Equal(want) {
			t.Errorf("pair %d started at +%v, want +%v (back to back)", k, s.Sub(t0), want.Sub(t0))
		}
	}
	for k, d := range lat {
		if want := 100*time.Millisecond + time.Duration(k)*60*time.Millisecond; d != want {
			t.Errorf("pair %d latency %v, want %v", k, d, want)
		}
	}
}

func TestPacersSpreadTheClients(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var first []time.Duration
	for i := range 8 {
		p := NewPacer(t0, i, 8, 400) // 50 ops/s each: every 20 ms
		a, b := p.Next(), p.Next()
		if b.Sub(a) != 20*time.Millisecond {
			t.Fatalf("client %d period %v, want 20ms", i, b.Sub(a))
		}
		first = append(first, a.Sub(t0))
	}
	slices.Sort(first)
	for i, d := range first {
		if want := time.Duration(i) * 2500 * time.Microsecond; d != want {
			t.Errorf("start %d at %v, want %v: clients evenly phase-shifted", i, d, want)
		}
	}
}

// sleepLocker takes d per call, in real time (0: answers at once).
type sleepLocker struct{ d time.Duration }

func (l sleepLocker) Acquire(ctx context.Context, _ string, _ bool) (Grant, error) {
	Sleep(ctx, l.d)
	return Grant{}, ctx.Err()
}
func (l sleepLocker) Release(ctx context.Context, _ string) error {
	Sleep(ctx, l.d)
	return nil
}
func (sleepLocker) Close() error { return nil }

func TestW1AtARate(t *testing.T) {
	if testing.Short() {
		t.Skip("real time")
	}
	ls := []Locker{sleepLocker{}, sleepLocker{}, sleepLocker{}, sleepLocker{}}
	spec := Spec{Target: "fake", Workload: "w1", Clients: 4, Warmup: 200 * time.Millisecond, Duration: time.Second, Rate: 200}
	rep := W1(context.Background(), spec, ls)
	// Generous: a loaded machine delays timers, but a late client catches
	// up, so the achieved rate stays near the scheduled one.
	if rep.RatePerSec != 200 || rep.OpsPerSec < 100 || rep.OpsPerSec > 300 || rep.Errors != 0 {
		t.Fatalf("at 200/s: rate %v, achieved %.0f ops/s, errors %d", rep.RatePerSec, rep.OpsPerSec, rep.Errors)
	}
	// One client at 100/s whose pairs take 30 ms: every pair falls
	// further behind, and the latencies say so.
	slow := Spec{Target: "fake", Workload: "w1", Clients: 1, Warmup: 100 * time.Millisecond, Duration: time.Second, Rate: 100}
	rep = W1(context.Background(), slow, []Locker{sleepLocker{d: 15 * time.Millisecond}})
	if rep.P50Ms < 60 || rep.OpsPerSec > 40 {
		t.Fatalf("slow client: p50 %.1f ms (want well above the 30 ms service time), %.0f ops/s", rep.P50Ms, rep.OpsPerSec)
	}
}

// A counter read as the window opens and closes lands in Extra as its
// change per op; one that cannot be read is left out.
func TestCountersPerOp(t *testing.T) {
	var ops atomic.Int64
	locker := countingLocker{&ops}
	spec := Spec{Target: "fake", Workload: "w1", Clients: 2, Warmup: 50 * time.Millisecond, Duration: 300 * time.Millisecond,
		Counters: map[string]func() (float64, error){
			// Three per pair: each pair's acquire and release, and one more.
			"calls":  func() (float64, error) { return 1.5 * float64(ops.Load()), nil },
			"broken": func() (float64, error) { return 0, errors.New("no metrics") },
		}}
	rep := W1(context.Background(), spec, []Locker{locker, locker})
	if rep.Ops == 0 {
		t.Fatal("no pairs")
	}
	// A pair that straddles the window's opening or closing counts in
	// one of the two and not the other: allow one per client and edge.
	if v, ok := rep.Extra["callsPerOp"]; !ok || math.Abs(v-3) > 3*4/float64(rep.Ops) {
		t.Fatalf("callsPerOp %v (%v), want 3 for %d pairs", v, ok, rep.Ops)
	}
	if _, ok := rep.Extra["brokenPerOp"]; ok {
		t.Fatal("a counter that failed to read got a figure")
	}
}

// countingLocker counts its calls, each taking a millisecond.
type countingLocker struct{ n *atomic.Int64 }

func (l countingLocker) Acquire(ctx context.Context, _ string, _ bool) (Grant, error) {
	l.n.Add(1)
	Sleep(ctx, time.Millisecond)
	return Grant{}, nil
}
func (l countingLocker) Release(ctx context.Context, _ string) error {
	l.n.Add(1)
	Sleep(ctx, time.Millisecond)
	return nil
}
func (countingLocker) Close() error { return nil }
