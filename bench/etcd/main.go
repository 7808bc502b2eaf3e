// Command etcd-peer is nacos-lock-bench's etcd peer, in a module of its
// own so etcd's dependencies stay out of nacos-lockd's go.mod:
//
//	etcd-peer server <etcd flags>    # etcd itself (go.etcd.io/etcd/server/v3/etcdmain)
//	etcd-peer bench --target etcd-mutex|etcd-v3lock --server 127.0.0.1:2379 --workload w1|w2 --clients N --duration D [--rate R] [--json]
//
// etcd-mutex is client/v3/concurrency's Mutex on a Session (one lease per
// client); etcd-v3lock is the server-side v3lock service (Lock/Unlock RPCs
// with the session's lease).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"go.etcd.io/etcd/server/v3/etcdserver/api/v3lock/v3lockpb"
	"go.uber.org/zap"

	"nacos-lockd/bench/load"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "server" {
		etcdmain.Main(append([]string{"etcd"}, os.Args[2:]...))
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "bench" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := bench(ctx, os.Args[2:], os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "etcd-peer:", err)
			os.Exit(1)
		}
		return
	}
	fmt.Fprintln(os.Stderr, "usage: etcd-peer server <etcd flags> | etcd-peer bench --target etcd-mutex|etcd-v3lock ...")
	os.Exit(2)
}

func bench(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("etcd-peer bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	target := fs.String("target", "etcd-mutex", "etcd-mutex or etcd-v3lock")
	server := fs.String("server", "127.0.0.1:2379", "etcd client address")
	workload := fs.String("workload", "w1", "w1 or w2")
	clients := fs.Int("clients", 16, "concurrent clients, one connection each")
	duration := fs.Duration("duration", 10*time.Second, "measured time")
	warmup := fs.Duration("warmup", 2*time.Second, "unmeasured time before")
	ttl := fs.Int("ttl", 30, "session lease in seconds")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	pid := fs.Int("pid", 0, "server process id for CPU/RSS (default: found from the port)")
	quiet := fs.Bool("quiet", false, "no progress lines")
	rate := fs.Float64("rate", 0, "w1: open loop at this many pairs/s in total (0: closed loop)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if *rate < 0 || (*rate > 0 && *workload != "w1") {
		return fmt.Errorf("--rate %g: open loop is for w1 only", *rate)
	}
	pids := []int{*pid}
	if *pid == 0 {
		_, port, _ := net.SplitHostPort(*server)
		p, _ := strconv.Atoi(port)
		pids = []int{load.PIDListening(p)}
	}
	var progress io.Writer = stderr
	if *quiet {
		progress = nil
	}
	spec := load.Spec{Target: *target, Workload: *workload, Clients: *clients, Warmup: *warmup, Duration: *duration, Rate: *rate, PIDs: pids, Progress: progress}
	ls, err := load.DialAll(ctx, *clients, func(ctx context.Context, i int) (load.Locker, error) {
		return dial(ctx, *server, *target, *ttl)
	})
	if err != nil {
		return err
	}
	defer load.CloseAll(ls)
	var rep load.Report
	switch *workload {
	case "w1":
		rep = load.W1(ctx, spec, ls)
	case "w2":
		rep = load.W2(ctx, spec, ls, 0)
	default:
		return fmt.Errorf("etcd runs w1 and w2, not %q", *workload)
	}
	if rep.Ops == 0 {
		// No latencies to report (their percentiles would be NaN, which
		// JSON cannot carry): say what happened instead.
		return fmt.Errorf("%s %s clients %d: no operation completed in %s (errors %d)", rep.Target, rep.Workload, rep.Clients, *duration, rep.Errors)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(stdout, "%s %s clients %d: %.0f ops/s, p50 %.3f ms, p99 %.3f ms, errors %d, server %.2f cores\n",
		rep.Target, rep.Workload, rep.Clients, rep.OpsPerSec, rep.P50Ms, rep.P99Ms, rep.Errors, rep.ServerCPU)
	return nil
}

type etcdLocker struct {
	cli     *clientv3.Client
	session *concurrency.Session
	v3lock  v3lockpb.LockClient // nil: concurrency.Mutex
	mu      sync.Mutex
	held    map[string]any // *concurrency.Mutex or the v3lock key
}

func dial(ctx context.Context, addr, target string, ttl int) (load.Locker, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{addr}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, err
	}
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(ttl), concurrency.WithContext(ctx))
	if err != nil {
		cli.Close()
		return nil, err
	}
	l := &etcdLocker{cli: cli, session: s, held: map[string]any{}}
	switch target {
	case "etcd-mutex":
	case "etcd-v3lock":
		l.v3lock = v3lockpb.NewLockClient(cli.ActiveConnection())
	default:
		s.Close()
		cli.Close()
		return nil, fmt.Errorf("unknown target %q", target)
	}
	return l, nil
}

func (l *etcdLocker) Acquire(ctx context.Context, key string, wait bool) (load.Grant, error) {
	sent := time.Now()
	if l.v3lock != nil {
		// The v3lock service always waits: it has no try.
		r, err := l.v3lock.Lock(ctx, &v3lockpb.LockRequest{Name: []byte("/bench/" + key), Lease: int64(l.session.Lease())})
		if err != nil {
			return load.Grant{}, err
		}
		l.mu.Lock()
		l.held[key] = r.Key
		l.mu.Unlock()
		return load.Grant{Sent: sent, Replied: time.Now()}, nil
	}
	m := concurrency.NewMutex(l.session, "/bench/"+key)
	var err error
	if wait {
		err = m.Lock(ctx)
	} else {
		err = m.TryLock(ctx)
		if errors.Is(err, concurrency.ErrLocked) {
			return load.Grant{}, load.ErrHeld
		}
	}
	if err != nil {
		return load.Grant{}, err
	}
	l.mu.Lock()
	l.held[key] = m
	l.mu.Unlock()
	return load.Grant{Sent: sent, Replied: time.Now()}, nil
}

func (l *etcdLocker) Release(ctx context.Context, key string) error {
	l.mu.Lock()
	h, ok := l.held[key]
	delete(l.held, key)
	l.mu.Unlock()
	if !ok {
		return errors.New("not held")
	}
	switch h := h.(type) {
	case *concurrency.Mutex:
		return h.Unlock(ctx)
	case []byte:
		_, err := l.v3lock.Unlock(ctx, &v3lockpb.UnlockRequest{Key: h})
		return err
	}
	return nil
}

func (l *etcdLocker) Close() error {
	l.session.Close()
	return l.cli.Close()
}
