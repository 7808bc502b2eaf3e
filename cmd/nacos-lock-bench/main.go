// Command nacos-lock-bench drives load against a Nacos-protocol lock
// server with the real gRPC protocol, one connection per client.
//
//	nacos-lock-bench --server 127.0.0.1:8848 --workload w1 --clients 64 --duration 10s [--json]
//
// Workloads:
//
//	w1  uncontended: each client acquires and releases its own key
//	w2  contended: every client blocks on ONE key (wait queue, push
//	    hand-off); reports hand-offs/s and FIFO violations
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"nacos-lockd/interop/client"
	"nacos-lockd/protocol"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "nacos-lock-bench:", err)
		os.Exit(1)
	}
}

type options struct {
	server   string // main port address; the SDK port is +1000
	workload string
	clients  int
	duration time.Duration
	warmup   time.Duration
	lease    int64
	json     bool
	pid      int
}

// Report is what a run measured; --json prints it.
type Report struct {
	Workload    string  `json:"workload"`
	Clients     int     `json:"clients"`
	DurationSec float64 `json:"durationSeconds"`
	Ops         int64   `json:"ops"`            // completed operations (w1: acquire+release pairs; w2: grants)
	OpsPerSec   float64 `json:"opsPerSecond"`   // ops / duration
	Errors      int64   `json:"errors"`         // failed calls (transport or 500)
	P50Ms       float64 `json:"p50Ms"`          // latency of one op
	P99Ms       float64 `json:"p99Ms"`          //
	P999Ms      float64 `json:"p999Ms"`         //
	FIFOViolate int64   `json:"fifoViolations"` // w2 only
	ServerCPU   float64 `json:"serverCpuCores"` // average cores used by the server process, if found
	ServerRSSMB float64 `json:"serverRssMiB"`   // resident set at the end, if found
	ServerPID   int     `json:"serverPid,omitempty"`
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nacos-lock-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.server, "server", "127.0.0.1:8848", "server main port address (the SDK port is +1000)")
	fs.StringVar(&o.workload, "workload", "w1", "w1 (uncontended) or w2 (one contended key)")
	fs.IntVar(&o.clients, "clients", 16, "concurrent clients, one connection each")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "unmeasured time before")
	fs.Int64Var(&o.lease, "lease", 30000, "lease in ms for each acquire")
	fs.BoolVar(&o.json, "json", false, "print the report as JSON")
	fs.IntVar(&o.pid, "pid", 0, "server process id for CPU/RSS (default: found from the listening port)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if o.clients < 1 {
		return errors.New("--clients must be at least 1")
	}
	host, port, err := net.SplitHostPort(o.server)
	if err != nil {
		return fmt.Errorf("--server %q: %w", o.server, err)
	}
	mainPort, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("--server %q: bad port", o.server)
	}
	grpcAddr := net.JoinHostPort(host, strconv.Itoa(mainPort+1000))
	if o.pid == 0 {
		o.pid = pidListening(mainPort + 1000)
	}

	clients := make([]*client.Client, o.clients)
	for i := range clients {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		c, err := client.Dial(dctx, grpcAddr, client.WithClientVersion("nacos-lock-bench"))
		cancel()
		if err != nil {
			return fmt.Errorf("connect client %d: %w", i, err)
		}
		defer c.Close()
		clients[i] = c
	}

	var w workload
	switch o.workload {
	case "w1":
		w = &uncontended{lease: o.lease}
	case "w2":
		w = &contended{lease: o.lease}
	default:
		return fmt.Errorf("unknown workload %q", o.workload)
	}
	rep, err := measure(ctx, o, clients, w, stderr)
	if err != nil {
		return err
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(stdout, "workload %s  clients %d  duration %.1fs\n", rep.Workload, rep.Clients, rep.DurationSec)
	fmt.Fprintf(stdout, "  ops/s %.0f  (ops %d, errors %d)\n", rep.OpsPerSec, rep.Ops, rep.Errors)
	fmt.Fprintf(stdout, "  latency p50 %.3f ms  p99 %.3f ms  p999 %.3f ms\n", rep.P50Ms, rep.P99Ms, rep.P999Ms)
	if rep.Workload == "w2" {
		fmt.Fprintf(stdout, "  FIFO violations %d\n", rep.FIFOViolate)
	}
	if rep.ServerPID != 0 {
		fmt.Fprintf(stdout, "  server pid %d: %.2f cores, RSS %.1f MiB\n", rep.ServerPID, rep.ServerCPU, rep.ServerRSSMB)
	}
	return nil
}

// workload runs one client's loop; each completed op is reported.
type workload interface {
	loop(ctx context.Context, id int, c *client.Client, rec *recorder)
}

// recorder collects latencies (only while measuring) and counts.
type recorder struct {
	measuring atomic.Bool
	mu        sync.Mutex
	lat       []time.Duration
	ops       atomic.Int64
	errs      atomic.Int64
	fifo      atomic.Int64
}

func (r *recorder) done(d time.Duration) {
	if !r.measuring.Load() {
		return
	}
	r.ops.Add(1)
	r.mu.Lock()
	r.lat = append(r.lat, d)
	r.mu.Unlock()
}

func (r *recorder) fail() {
	if r.measuring.Load() {
		r.errs.Add(1)
	}
}

func measure(ctx context.Context, o options, clients []*client.Client, w workload, progress io.Writer) (Report, error) {
	rec := &recorder{}
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i, c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.loop(runCtx, i, c, rec)
		}()
	}
	sleep(ctx, o.warmup)
	cpu0, _ := procCPU(o.pid)
	rec.measuring.Store(true)
	start := time.Now()
	tick := time.NewTicker(time.Second)
	end := time.NewTimer(o.duration)
loop:
	for {
		select {
		case <-tick.C:
			el := time.Since(start).Seconds()
			fmt.Fprintf(progress, "\r%5.1fs  %8.0f ops/s  errors %d   ", el, float64(rec.ops.Load())/el, rec.errs.Load())
		case <-end.C:
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	tick.Stop()
	rec.measuring.Store(false)
	elapsed := time.Since(start)
	cpu1, cpuOK := procCPU(o.pid)
	fmt.Fprintln(progress)
	cancel()
	wg.Wait()
	rep := Report{
		Workload: o.workload, Clients: o.clients, DurationSec: elapsed.Seconds(),
		Ops: rec.ops.Load(), Errors: rec.errs.Load(), FIFOViolate: rec.fifo.Load(),
	}
	rep.OpsPerSec = float64(rep.Ops) / elapsed.Seconds()
	rec.mu.Lock()
	sort.Slice(rec.lat, func(i, j int) bool { return rec.lat[i] < rec.lat[j] })
	rep.P50Ms, rep.P99Ms, rep.P999Ms = pct(rec.lat, 0.50), pct(rec.lat, 0.99), pct(rec.lat, 0.999)
	rec.mu.Unlock()
	if cpuOK && o.pid != 0 {
		rep.ServerPID = o.pid
		rep.ServerCPU = (cpu1 - cpu0) / elapsed.Seconds()
		rep.ServerRSSMB = procRSSMiB(o.pid)
	}
	return rep, ctx.Err()
}

func pct(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return float64(sorted[max(i, 0)]) / 1e6
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// uncontended: each client locks its own key and releases it.
type uncontended struct{ lease int64 }

func (u *uncontended) loop(ctx context.Context, id int, c *client.Client, rec *recorder) {
	li := client.Instance(fmt.Sprintf("bench-w1-%d", id), "NON_REENTRANT", fmt.Sprintf("bench-%d", id), client.Ms(u.lease), client.Ms(-1))
	rel := li
	rel.ExpiredTime = client.Ms(0)
	for ctx.Err() == nil {
		t0 := time.Now()
		r, err := c.Lock(ctx, protocol.OpAcquire, li)
		if err != nil || r.ResultCode != 200 || !r.Result {
			rec.fail()
			continue
		}
		r, err = c.Lock(ctx, protocol.OpRelease, rel)
		if err != nil || r.ResultCode != 200 || !r.Result {
			rec.fail()
			continue
		}
		rec.done(time.Since(t0))
	}
}

// contended: every client queues on one key; a grant is claimed after the
// server's push, held briefly, released. FIFO is checked by queue position
// order: grants must follow the order in which clients were queued.
type contended struct {
	lease int64
	mu    sync.Mutex
	queue []int // client ids in the order the server queued them
}

func (w *contended) loop(ctx context.Context, id int, c *client.Client, rec *recorder) {
	owner := fmt.Sprintf("bench-%d", id)
	li := client.Instance("bench-w2", "NON_REENTRANT", owner, client.Ms(w.lease), client.Ms(60000))
	rel := client.Instance("bench-w2", "NON_REENTRANT", owner, client.Ms(0), client.Ms(-1))
	for ctx.Err() == nil {
		t0 := time.Now()
		r, err := c.Lock(ctx, protocol.OpAcquire, li)
		if err != nil || r.ResultCode != 200 {
			rec.fail()
			continue
		}
		if !r.Result {
			w.mu.Lock()
			w.queue = append(w.queue, id)
			w.mu.Unlock()
			// Wait for the hand-off push, then claim.
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			_, err := client.WaitPush[*protocol.LockNotificationRequest](wctx, c)
			cancel()
			if err != nil {
				w.forget(id)
				rec.fail()
				continue
			}
			retry := li
			retry.WaiterRetry = true
			r, err = c.Lock(ctx, protocol.OpAcquire, retry)
			if err != nil || r.ResultCode != 200 || !r.Result {
				w.forget(id)
				rec.fail()
				continue
			}
			w.mu.Lock()
			if len(w.queue) > 0 && w.queue[0] != id {
				rec.fifo.Add(1) // someone queued earlier is still waiting
			}
			w.mu.Unlock()
			w.forget(id)
		}
		rec.done(time.Since(t0))
		if _, err := c.Lock(ctx, protocol.OpRelease, rel); err != nil {
			rec.fail()
		}
	}
}

func (w *contended) forget(id int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, q := range w.queue {
		if q == id {
			w.queue = append(w.queue[:i], w.queue[i+1:]...)
			return
		}
	}
}
