package load

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Report is what one run measured; --json prints it. Ratios between
// reports of the same run are what matter: absolute figures drift on a
// shared machine.
type Report struct {
	Target      string  `json:"target"`   // nacos-lockd, etcd-mutex, redis-fsync-always, ...
	Workload    string  `json:"workload"` // w1 .. w5
	Clients     int     `json:"clients"`
	DurationSec float64 `json:"durationSeconds"`
	// Ops are completed operations: w1 acquire+release pairs, w2 grants
	// (hand-offs), w3 acquires, w5 renews.
	Ops       int64   `json:"ops"`
	OpsPerSec float64 `json:"opsPerSecond"` // achieved, in open-loop runs too
	// RatePerSec is the scheduled rate of an open-loop run (Spec.Rate);
	// 0 for a closed-loop run.
	RatePerSec float64 `json:"ratePerSecond,omitempty"`
	// Round is which of a suite's interleaved rounds measured this point
	// (from 1; 0 outside a suite's rounds): the reports of one round were
	// taken within a minute of each other, so their ratio is the fair one.
	Round  int   `json:"round,omitempty"`
	Errors int64 `json:"errors"` // failed calls (transport, timeouts, 500s, unexpected refusals)
	// Latency of one op (w1: the pair; w2: request to grant). In an
	// open-loop run it runs from the op's scheduled start, so a client
	// that fell behind counts its lag.
	P50Ms  float64 `json:"p50Ms"`
	P99Ms  float64 `json:"p99Ms"`
	P999Ms float64 `json:"p999Ms"`
	// FIFOViolations (w2, targets with a server queue and fencing tokens):
	// grants that provably came out of queue order; FIFOChecked is how
	// many grants the check covered. -1 when the target cannot be checked.
	FIFOViolations int64 `json:"fifoViolations"`
	FIFOChecked    int64 `json:"fifoChecked"`
	// ServerCPU is the average number of cores the server processes used
	// while measuring; ServerRSSMiB their resident set at the end.
	ServerCPU    float64 `json:"serverCpuCores"`
	ServerRSSMiB float64 `json:"serverRssMiB"`
	// ServerCPUPerOp is server CPU microseconds per op: on a shared
	// machine it moves much less than ops/s does.
	ServerCPUPerOp float64 `json:"serverCpuUsPerOp,omitempty"`
	// ServerCoreUsPerOp is the busy time per op of the CPUs the servers
	// are pinned to (Spec.ServerCPUs), interrupts and kernel workers
	// included: a change that moves work out of the server process (an
	// asynchronous write whose completion a kernel worker finishes)
	// lowers ServerCPUPerOp but not this.
	ServerCoreUsPerOp float64 `json:"serverCoreUsPerOp,omitempty"`
	ServerPIDs        []int   `json:"serverPids,omitempty"`
	// Extra holds workload-specific figures (w3 memory per lock, snapshot
	// size, restart time; w4 expiry lateness; w5 CPU cost).
	Extra    map[string]float64 `json:"extra,omitempty"`
	Notes    []string           `json:"notes,omitempty"`
	Timeline []Sample           `json:"timeline,omitempty"` // one per second of the measured window
	ErrorLog []string           `json:"firstErrors,omitempty"`
}

// Sample is one second of the measured window.
type Sample struct {
	T         float64 `json:"t"` // end of the second, from the start of measuring
	OpsPerSec float64 `json:"opsPerSecond"`
	P50Ms     float64 `json:"p50Ms"`
	P99Ms     float64 `json:"p99Ms"`
}

// Spec describes one run.
type Spec struct {
	Target   string
	Workload string
	Clients  int
	Warmup   time.Duration
	Duration time.Duration
	// Rate, when above 0, makes W1 open-loop: Rate ops/s in total, each
	// client on its own evenly spaced schedule (see Pacer). 0: closed
	// loop, each client issues its next op as soon as the last returns.
	Rate float64
	// PIDs are the server processes whose CPU and RSS are reported (none:
	// not reported). A PID of os.Getpid() measures an in-process server.
	PIDs []int
	// ServerCPUs, when set, are CPUs the servers run on with nothing else
	// scheduled there (pinned, the load generator elsewhere): the report
	// then also gives their whole busy time per op (ServerCoreUsPerOp),
	// which counts the kernel's work for the server outside the process.
	ServerCPUs []int
	Progress   io.Writer // nil: no progress
	// Counters are read as the measured window opens and as it closes;
	// the report's Extra gets each one's change per op as <name>PerOp (a
	// counter that fails to read is left out). nacos-lockd's Raft applied
	// index gives the log entries, and so the syncs, per op.
	Counters map[string]func() (float64, error)
}

// Recorder collects what the client loops did. Each loop owns one Shard,
// so recording takes no lock.
type Recorder struct {
	measuring atomic.Bool
	start     atomic.Int64 // UnixNano when measuring began
	ops       atomic.Int64
	errs      atomic.Int64
	shards    []*Shard

	errMu  sync.Mutex
	errLog []string
}

// Shard is one client's part of a Recorder.
type Shard struct {
	r   *Recorder
	lat []time.Duration
	at  []int32 // completion time, ms since the start of measuring
}

// Measuring reports whether the measured window is open.
func (s *Shard) Measuring() bool { return s.r.measuring.Load() }

// Done records one completed op that took d.
func (s *Shard) Done(d time.Duration) {
	if !s.r.measuring.Load() {
		return
	}
	s.r.ops.Add(1)
	s.lat = append(s.lat, d)
	s.at = append(s.at, int32((time.Now().UnixNano()-s.r.start.Load())/1e6))
}

// Fail records a failed call. Failures outside the window are not counted
// but the first few are still logged, for diagnosis.
func (s *Shard) Fail(err error) {
	if s.r.measuring.Load() {
		s.r.errs.Add(1)
	}
	s.r.logErr(err)
}

func (r *Recorder) logErr(err error) {
	if err == nil {
		err = errors.New("failed")
	}
	r.errMu.Lock()
	defer r.errMu.Unlock()
	if len(r.errLog) < 10 {
		r.errLog = append(r.errLog, err.Error())
	}
}

// Loop is one client's work: it runs until ctx ends, recording each op.
type Loop func(ctx context.Context, id int, sh *Shard)

// Run starts spec.Clients loops, lets them warm up, measures for
// spec.Duration, stops them and reports. The report's FIFO fields are -1;
// workloads that check FIFO fill them in.
func Run(ctx context.Context, spec Spec, loop Loop) Report {
	rec := &Recorder{}
	rec.shards = make([]*Shard, spec.Clients)
	for i := range rec.shards {
		rec.shards[i] = &Shard{r: rec}
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i := range spec.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			loop(runCtx, i, rec.shards[i])
		}()
	}
	Sleep(ctx, spec.Warmup)
	cpu0 := CPUSeconds(spec.PIDs)
	core0 := sampleCores(spec.ServerCPUs)
	counters0 := readCounters(spec.Counters)
	start := time.Now()
	rec.start.Store(start.UnixNano())
	rec.measuring.Store(true)
	tick := time.NewTicker(time.Second)
	end := time.NewTimer(spec.Duration)
	var lastOps int64
	last := start
loop:
	for {
		select {
		case now := <-tick.C:
			ops := rec.ops.Load()
			if spec.Progress != nil {
				label := spec.Workload
				if spec.Rate > 0 {
					label += fmt.Sprintf(" at %g/s", spec.Rate)
				}
				fmt.Fprintf(spec.Progress, "  %-20s %s c=%-4d %5.1fs %10.0f ops/s  errors %d\n", spec.Target, label, spec.Clients,
					now.Sub(start).Seconds(), float64(ops-lastOps)/now.Sub(last).Seconds(), rec.errs.Load())
			}
			lastOps, last = ops, now
		case <-end.C:
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	tick.Stop()
	rec.measuring.Store(false)
	elapsed := time.Since(start)
	cpu1 := CPUSeconds(spec.PIDs)
	core1 := sampleCores(spec.ServerCPUs)
	counters1 := readCounters(spec.Counters)
	cancel()
	wg.Wait()

	rep := Report{
		Target: spec.Target, Workload: spec.Workload, Clients: spec.Clients, DurationSec: elapsed.Seconds(),
		Ops: rec.ops.Load(), Errors: rec.errs.Load(), FIFOViolations: -1, ServerPIDs: spec.PIDs, RatePerSec: spec.Rate,
	}
	rep.OpsPerSec = float64(rep.Ops) / elapsed.Seconds()
	var all []time.Duration
	for _, sh := range rec.shards {
		all = append(all, sh.lat...)
	}
	slices.Sort(all)
	rep.P50Ms, rep.P99Ms, rep.P999Ms = Pct(all, 0.50), Pct(all, 0.99), Pct(all, 0.999)
	rep.Timeline = timeline(rec.shards, elapsed)
	if len(spec.PIDs) > 0 {
		rep.ServerCPU = (cpu1 - cpu0) / elapsed.Seconds()
		rep.ServerRSSMiB = RSSMiB(spec.PIDs)
		if rep.Ops > 0 {
			rep.ServerCPUPerOp = (cpu1 - cpu0) * 1e6 / float64(rep.Ops)
		}
	}
	if busy, ok := coreBusySeconds(core0, core1, len(spec.ServerCPUs)); ok && rep.Ops > 0 {
		rep.ServerCoreUsPerOp = busy * 1e6 / float64(rep.Ops)
	}
	for name, v0 := range counters0 {
		if v1, ok := counters1[name]; ok && rep.Ops > 0 {
			if rep.Extra == nil {
				rep.Extra = map[string]float64{}
			}
			rep.Extra[name+"PerOp"] = (v1 - v0) / float64(rep.Ops)
		}
	}
	rec.errMu.Lock()
	rep.ErrorLog = rec.errLog
	rec.errMu.Unlock()
	return rep
}

// readCounters reads every counter that can be read now.
func readCounters(cs map[string]func() (float64, error)) map[string]float64 {
	out := make(map[string]float64, len(cs))
	for name, read := range cs {
		if v, err := read(); err == nil {
			out[name] = v
		}
	}
	return out
}

func timeline(shards []*Shard, elapsed time.Duration) []Sample {
	secs := int(math.Ceil(elapsed.Seconds()))
	if secs <= 0 {
		return nil
	}
	buckets := make([][]time.Duration, secs)
	for _, sh := range shards {
		for i, at := range sh.at {
			b := min(max(int(at/1000), 0), secs-1)
			buckets[b] = append(buckets[b], sh.lat[i])
		}
	}
	out := make([]Sample, secs)
	for i, b := range buckets {
		slices.Sort(b)
		width := 1.0
		if i == secs-1 {
			width = elapsed.Seconds() - float64(secs-1)
		}
		out[i] = Sample{T: float64(i) + width, OpsPerSec: float64(len(b)) / width, P50Ms: Pct(b, 0.5), P99Ms: Pct(b, 0.99)}
		if len(b) == 0 {
			out[i].P50Ms, out[i].P99Ms = 0, 0
		}
	}
	return out
}

// Pct returns the p-quantile of sorted latencies in milliseconds (NaN
// for none).
func Pct(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return float64(sorted[max(i, 0)]) / 1e6
}

// PctMs is Pct for values already in milliseconds.
func PctMs(v []float64, p float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// Sleep waits d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// Self is this process's id, for in-process servers.
func Self() []int { return []int{os.Getpid()} }
