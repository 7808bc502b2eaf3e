package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"nacos-lockd/bench/load"
	"nacos-lockd/bench/peers"
)

func parseCounts(s, def string) ([]int, error) {
	if s == "" {
		s = def
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--locks %q: want positive counts", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// acquireMany has the clients take keys prefix0..prefix(n-1) between them
// (client i takes every c-th key), each with lease ms, and reports each
// acquire's send time through onSent (in no particular order).
func acquireMany(ctx context.Context, ls []load.Locker, prefix string, n int, lease int64, progress io.Writer, label string,
	onSent func(sent time.Time)) (load.Report, error) {
	var done, errs atomic.Int64
	var firstErr atomic.Value
	lats := make([][]time.Duration, len(ls))
	start := time.Now()
	stop := make(chan struct{})
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last, lastT := int64(0), start
		for {
			select {
			case now := <-t.C:
				d := done.Load()
				if progress != nil {
					fmt.Fprintf(progress, "  %-20s %s %8d/%d held  %8.0f acquires/s  errors %d\n", "nacos-lockd", label, d, n,
						float64(d-last)/now.Sub(lastT).Seconds(), errs.Load())
				}
				last, lastT = d, now
			case <-stop:
				return
			}
		}
	}()
	var wg sync.WaitGroup
	for i, l := range ls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			nl := l.(*nacosLocker)
			for k := i; k < n && ctx.Err() == nil; k += len(ls) {
				key := prefix + strconv.Itoa(k)
				for attempt := 0; ; attempt++ {
					t0 := time.Now()
					_, err := nl.acquire(ctx, key, lease, false)
					if err == nil {
						lats[i] = append(lats[i], time.Since(t0))
						if onSent != nil {
							onSent(t0)
						}
						done.Add(1)
						break
					}
					errs.Add(1)
					firstErr.CompareAndSwap(nil, err)
					if attempt >= 3 || ctx.Err() != nil {
						break
					}
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	el := time.Since(start)
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	rep := load.Report{Ops: done.Load(), Errors: errs.Load(), DurationSec: el.Seconds(), FIFOViolations: -1}
	rep.OpsPerSec = float64(rep.Ops) / el.Seconds()
	rep.P50Ms, rep.P99Ms, rep.P999Ms = load.Pct(all, 0.5), load.Pct(all, 0.99), load.Pct(all, 0.999)
	if e, ok := firstErr.Load().(error); ok {
		rep.ErrorLog = append(rep.ErrorLog, e.Error())
	}
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}
	return rep, nil
}

// w3 holds each count of locks at once on a fresh server (when spawned)
// and reports memory per held lock; with --spawn also the snapshot size
// and export time and the restart-to-ready time with that many locks.
func w3(ctx context.Context, o options, spec load.Spec) ([]load.Report, error) {
	counts, err := parseCounts(o.locks, "100000,1000000")
	if err != nil {
		return nil, err
	}
	var reps []load.Report
	for _, n := range counts {
		srv, err := nacosServer(ctx, o)
		if err != nil {
			return reps, err
		}
		rep, err := w3Once(ctx, o, spec, srv, n)
		srv.close()
		reps = append(reps, rep)
		if err != nil {
			return reps, err
		}
	}
	return reps, nil
}

func w3Once(ctx context.Context, o options, spec load.Spec, srv *nacosSrv, n int) (load.Report, error) {
	pids := []int{srv.pid()}
	ls, err := load.DialAll(ctx, o.clients, dialNacos(srv.grpcAddr, o.lease))
	if err != nil {
		return load.Report{}, err
	}
	defer load.CloseAll(ls)
	time.Sleep(time.Second)
	rss0 := load.RSSMiB(pids)
	heap0, _ := peers.Metric(srv.metrics, "go_memstats_heap_inuse_bytes", "")
	cpu0 := load.CPUSeconds(pids)
	prefix := fmt.Sprintf("bench-w3-%d-", time.Now().UnixNano())
	rep, err := acquireMany(ctx, ls, prefix, n, 30*60*1000, spec.Progress, fmt.Sprintf("w3 n=%d", n), nil)
	rep.Target, rep.Workload, rep.Clients, rep.ServerPIDs = spec.Target, "w3", o.clients, pids
	cpuUsed := load.CPUSeconds(pids) - cpu0
	rep.ServerCPU = cpuUsed / rep.DurationSec
	if rep.Ops > 0 {
		rep.ServerCPUPerOp = cpuUsed * 1e6 / float64(rep.Ops)
	}
	if err != nil {
		return rep, err
	}
	time.Sleep(2 * time.Second) // let the last batch settle
	rss1 := load.RSSMiB(pids)
	heap1, _ := peers.Metric(srv.metrics, "go_memstats_heap_inuse_bytes", "")
	held, _ := peers.Metric(srv.metrics, "nacoslockd_locks_held", "")
	rep.ServerRSSMiB = rss1
	rep.Extra = map[string]float64{
		"locks":                 float64(n),
		"locksHeld":             held,
		"rssBeforeMiB":          rss0,
		"rssHeldMiB":            rss1,
		"rssBytesPerLock":       (rss1 - rss0) * (1 << 20) / float64(n),
		"heapInuseBytesPerLock": (heap1 - heap0) / float64(n),
	}
	if srv.proc == nil {
		rep.Notes = append(rep.Notes, "snapshot and restart not measured: the server was not started by the bench (--spawn)")
		return rep, nil
	}
	exportDir := filepath.Join(srv.dir, "export")
	var exportTook time.Duration
	took, err := srv.restart(ctx, func() error {
		t0 := time.Now()
		// On the server's CPUs: it is nacos-lockd's own work.
		var out bytes.Buffer
		cmd := exec.CommandContext(ctx, srv.bin, "snapshot", "export", "--data-dir", srv.dataDir(), "--out", exportDir)
		cmd.Stdout, cmd.Stderr = &out, &out
		err := peers.StartCmd(cmd, srv.cpus)
		if err == nil {
			err = cmd.Wait()
		}
		exportTook = time.Since(t0)
		if err != nil {
			return fmt.Errorf("snapshot export: %w\n%s", err, out.String())
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	var size int64
	_ = filepath.Walk(exportDir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			size += fi.Size()
		}
		return nil
	})
	heldAfter, _ := peers.Metric(srv.metrics, "nacoslockd_locks_held", "")
	rep.Extra["snapshotBytes"] = float64(size)
	rep.Extra["snapshotBytesPerLock"] = float64(size) / float64(n)
	rep.Extra["snapshotExportSeconds"] = exportTook.Seconds()
	rep.Extra["restartToReadySeconds"] = took.Seconds()
	rep.Extra["locksHeldAfterRestart"] = heldAfter
	rep.Extra["rssAfterRestartMiB"] = load.RSSMiB([]int{srv.pid()})
	rep.ServerPIDs = []int{srv.pid()}
	rep.Notes = append(rep.Notes, "snapshot figures are `nacos-lockd snapshot export` on the stopped node (same archive writer as Raft snapshots)")
	return rep, nil
}

// w4 acquires n locks with short leases and never releases them; it
// follows the server's expiry counter and reports expiry lateness: the
// k-th expiry observed minus the k-th lease end (leases end in acquire
// order and the reaper frees them in lease order). A lease end is taken
// as the acquire's send time plus the lease, so lateness is never
// understated.
func w4(ctx context.Context, o options, spec load.Spec, srv *nacosSrv) (load.Report, error) {
	counts, err := parseCounts(o.locks, "100000")
	if err != nil {
		return load.Report{}, err
	}
	n := counts[0]
	pids := []int{srv.pid()}
	ls, err := load.DialAll(ctx, o.clients, dialNacos(srv.grpcAddr, o.lease))
	if err != nil {
		return load.Report{}, err
	}
	defer load.CloseAll(ls)
	expired0, err := peers.Metric(srv.metrics, "nacoslockd_lock_endings_total", `cause="expiry"`)
	if err != nil {
		return load.Report{}, err
	}
	// Follow the expiry counter every 50 ms (a scrape costs the server
	// about a millisecond, so this adds a few percent to its CPU).
	var (
		obsMu sync.Mutex
		seen  []expiryObs
	)
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	lastSeen := func() float64 {
		obsMu.Lock()
		defer obsMu.Unlock()
		if len(seen) == 0 {
			return 0
		}
		return seen[len(seen)-1].n
	}
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-pollCtx.Done():
				return
			case <-t.C:
				v, err := peers.Metric(srv.metrics, "nacoslockd_lock_endings_total", `cause="expiry"`)
				if err == nil {
					obsMu.Lock()
					seen = append(seen, expiryObs{time.Now(), v - expired0})
					obsMu.Unlock()
				}
			}
		}
	}()
	var endsMu sync.Mutex
	ends := make([]time.Time, 0, n)
	lease := time.Duration(o.churnLease) * time.Millisecond
	cpuStart := load.CPUSeconds(pids)
	prefix := fmt.Sprintf("bench-w4-%d-", time.Now().UnixNano())
	rep, err := acquireMany(ctx, ls, prefix, n, o.churnLease, spec.Progress, fmt.Sprintf("w4 n=%d", n), func(sent time.Time) {
		endsMu.Lock()
		ends = append(ends, sent.Add(lease))
		endsMu.Unlock()
	})
	rep.Target, rep.Workload, rep.Clients, rep.ServerPIDs = spec.Target, "w4", o.clients, pids
	if err != nil {
		return rep, err
	}
	acquiredAt := time.Now()
	cpuAcquired := load.CPUSeconds(pids)
	want := float64(len(ends))
	deadline := acquiredAt.Add(lease + 5*time.Minute)
	for lastSeen() < want && time.Now().Before(deadline) && ctx.Err() == nil {
		if spec.Progress != nil {
			fmt.Fprintf(spec.Progress, "  %-20s w4 expired %8.0f/%.0f\n", "nacos-lockd", lastSeen(), want)
		}
		load.Sleep(ctx, time.Second)
	}
	stopPoll()
	doneAt := time.Now()
	cpuDone := load.CPUSeconds(pids)
	expiredN := lastSeen()
	obsMu.Lock()
	defer obsMu.Unlock()
	slices.SortFunc(ends, func(a, b time.Time) int { return a.Compare(b) })
	var late []float64
	j := 0
	for k := range ends {
		for j < len(seen) && seen[j].n < float64(k+1) {
			j++
		}
		if j == len(seen) {
			break
		}
		// The expiry happened between the previous sample and this one.
		at := seen[j].t
		if j > 0 {
			at = seen[j-1].t.Add(seen[j].t.Sub(seen[j-1].t) / 2)
		}
		late = append(late, float64(at.Sub(ends[k]))/1e6)
	}
	if len(seen) > 0 {
		for _, s := range seen {
			if s.n >= expiredN {
				doneAt = s.t
				break
			}
		}
	}
	tail := doneAt.Sub(acquiredAt).Seconds()
	rep.ServerCPU = (cpuDone - cpuStart) / (rep.DurationSec + time.Since(acquiredAt).Seconds())
	rep.ServerRSSMiB = load.RSSMiB(pids)
	rep.Extra = map[string]float64{
		"locks":                    float64(n),
		"leaseMs":                  float64(o.churnLease),
		"expired":                  expiredN,
		"expiryLatenessP50Ms":      load.PctMs(late, 0.5),
		"expiryLatenessP99Ms":      load.PctMs(late, 0.99),
		"expiryLatenessMaxMs":      load.PctMs(late, 1),
		"reaperTailSeconds":        tail,
		"serverCoresAfterAcquires": (cpuDone - cpuAcquired) / max(tail, 1e-3),
		"serverCpuSecondsTotal":    cpuDone - cpuStart,
		"serverCpuUsPerExpiry":     (cpuDone - cpuAcquired) * 1e6 / max(expiredN-countAt(seen, acquiredAt), 1),
	}
	if expiredN < want {
		rep.Notes = append(rep.Notes, fmt.Sprintf("only %.0f of %.0f leases expired within the lease + 5 min", expiredN, want))
	}
	rep.Notes = append(rep.Notes, "reaper CPU: the server's cores from the last acquire to the last expiry, when it does nothing but expire (and answer a /metrics scrape every 50 ms)")
	return rep, nil
}

// expiryObs is one reading of the server's expiry counter.
type expiryObs struct {
	t time.Time
	n float64
}

// countAt is the last reading at or before at.
func countAt(s []expiryObs, at time.Time) float64 {
	v := 0.0
	for _, o := range s {
		if o.t.After(at) {
			break
		}
		v = o.n
	}
	return v
}

// w5 holds n locks on renewers connections and renews each every
// renewEvery, spread evenly, as Java watchdogs do. It reports the server
// CPU the renewals cost (against the same server idle) and W1 latency with
// and without them.
func w5(ctx context.Context, o options, spec load.Spec, srv *nacosSrv) (load.Report, error) {
	counts, err := parseCounts(o.locks, "10000")
	if err != nil {
		return load.Report{}, err
	}
	n := counts[0]
	renewers := min(100, n)
	pids := []int{srv.pid()}
	ls, err := load.DialAll(ctx, renewers, dialNacos(srv.grpcAddr, o.lease))
	if err != nil {
		return load.Report{}, err
	}
	defer load.CloseAll(ls)
	// Hold with a lease that outlives the phases without renewals (idle,
	// W1 alone): the cost of a renew does not depend on the lease.
	lease := max(o.lease, 3*o.renewEvery.Milliseconds(), 10*60*1000)
	prefix := fmt.Sprintf("bench-w5-%d-", time.Now().UnixNano())
	if _, err := acquireMany(ctx, ls, prefix, n, lease, spec.Progress, fmt.Sprintf("w5 hold n=%d", n), nil); err != nil {
		return load.Report{}, err
	}
	w1ls, err := load.DialAll(ctx, o.w1Clients, dialNacos(srv.grpcAddr, o.lease))
	if err != nil {
		return load.Report{}, err
	}
	defer load.CloseAll(w1ls)
	progress := spec.Progress
	cpuWindow := func() float64 {
		c0, t0 := load.CPUSeconds(pids), time.Now()
		load.Sleep(ctx, o.duration)
		return (load.CPUSeconds(pids) - c0) / time.Since(t0).Seconds()
	}
	w1Spec := load.Spec{Target: "nacos-lockd", Workload: "w1", Clients: o.w1Clients, Warmup: o.warmup, Duration: o.duration, PIDs: pids, Progress: progress}

	idle := cpuWindow()
	alone := load.W1(ctx, w1Spec, w1ls)

	// Renewals: each renewer renews its locks round-robin, one every
	// renewEvery/locksPerRenewer, starting at staggered offsets.
	var renews, renewErrs atomic.Int64
	var firstErr atomic.Value
	var latMu sync.Mutex
	var lats []time.Duration
	var measuring atomic.Bool
	rctx, stopRenew := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, l := range ls {
		var keys []string
		for k := i; k < n; k += renewers {
			keys = append(keys, prefix+strconv.Itoa(k))
		}
		if len(keys) == 0 {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			nl := l.(*nacosLocker)
			step := o.renewEvery / time.Duration(len(keys))
			load.Sleep(rctx, step*time.Duration(i)/time.Duration(renewers))
			t := time.NewTicker(step)
			defer t.Stop()
			var mine []time.Duration
			defer func() {
				latMu.Lock()
				lats = append(lats, mine...)
				latMu.Unlock()
			}()
			for j := 0; ; j++ {
				select {
				case <-rctx.Done():
					return
				case <-t.C:
				}
				t0 := time.Now()
				err := nl.renew(rctx, keys[j%len(keys)], lease)
				if !measuring.Load() {
					continue
				}
				if err != nil {
					if rctx.Err() == nil {
						renewErrs.Add(1)
						firstErr.CompareAndSwap(nil, err)
					}
					continue
				}
				renews.Add(1)
				mine = append(mine, time.Since(t0))
			}
		}()
	}
	load.Sleep(ctx, o.warmup)
	measuring.Store(true)
	t0 := time.Now()
	renewing := cpuWindow()
	renewSecs := time.Since(t0).Seconds()
	nRenews := renews.Load()
	with := load.W1(ctx, w1Spec, w1ls)
	stopRenew()
	wg.Wait()
	slices.Sort(lats)
	rep := load.Report{Target: spec.Target, Workload: "w5", Clients: renewers, DurationSec: renewSecs, Ops: nRenews,
		OpsPerSec: float64(nRenews) / renewSecs, Errors: renewErrs.Load(), FIFOViolations: -1, ServerPIDs: pids,
		ServerCPU: renewing, ServerRSSMiB: load.RSSMiB(pids)}
	rep.P50Ms, rep.P99Ms, rep.P999Ms = load.Pct(lats, 0.5), load.Pct(lats, 0.99), load.Pct(lats, 0.999)
	rep.Errors += alone.Errors + with.Errors
	if e, ok := firstErr.Load().(error); ok {
		rep.ErrorLog = append(rep.ErrorLog, "renew: "+e.Error())
	}
	rep.ErrorLog = append(rep.ErrorLog, alone.ErrorLog...)
	rep.ErrorLog = append(rep.ErrorLog, with.ErrorLog...)
	rep.Extra = map[string]float64{
		"heldLocks":               float64(n),
		"renewEverySeconds":       o.renewEvery.Seconds(),
		"idleCores":               idle,
		"renewingCores":           renewing,
		"renewCostPctOfOneCore":   100 * (renewing - idle),
		"cpuUsPerRenew":           (renewing - idle) * 1e6 / max(float64(nRenews)/renewSecs, 1),
		"w1Clients":               float64(o.w1Clients),
		"w1PairsPerSecAlone":      alone.OpsPerSec,
		"w1PairsPerSecWithRenews": with.OpsPerSec,
		"w1P50MsAlone":            alone.P50Ms,
		"w1P50MsWithRenews":       with.P50Ms,
		"w1P99MsAlone":            alone.P99Ms,
		"w1P99MsWithRenews":       with.P99Ms,
	}
	rep.Timeline = with.Timeline
	return rep, nil
}

func sortedKeys(m map[string]float64) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
