package replica

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"nacos-lockd/replica/raftlog"
	"nacos-lockd/replica/walfile"
	"nacos-lockd/settings"
	"nacos-lockd/statemachine"
	"nacos-lockd/storage"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

type nodeEnv struct {
	dir, addr string
	window    time.Duration         // RaftConfig.CoalesceWindow
	raftLog   string                // RaftConfig.RaftLog
	engine    string                // RaftConfig.Engine
	metrics   prometheus.Registerer // RaftConfig.Metrics
	mu        sync.Mutex
	notes     []statemachine.Notification
}

func (e *nodeEnv) start(t *testing.T) (*Node, *storage.DB) {
	t.Helper()
	db, err := storage.Open(storage.Config{Dir: filepath.Join(e.dir, "locks")})
	if err != nil {
		t.Fatal(err)
	}
	n, err := Start(RaftConfig{NodeHostDir: filepath.Join(e.dir, "raft"), RaftAddress: e.addr, CoalesceWindow: e.window, RaftLog: e.raftLog, Engine: e.engine, Metrics: e.metrics}, db, func(ns []statemachine.Notification) {
		e.mu.Lock()
		e.notes = append(e.notes, ns...)
		e.mu.Unlock()
	}, zerolog.Nop())
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		n.Close()
		db.Close()
		t.Fatal(err)
	}
	return n, db
}

// forEachEngine runs test under Raft and under the sole-voter engine.
func forEachEngine(t *testing.T, test func(*testing.T, string)) {
	for _, engine := range []string{EngineRaft, EngineSolo} {
		t.Run(engine, func(t *testing.T) { test(t, engine) })
	}
}

func propose(t *testing.T, n *Node, c statemachine.Command) statemachine.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := n.Propose(ctx, c)
	if err != nil {
		t.Fatalf("propose %s: %v", c.Op, err)
	}
	return r
}

func TestNodeProposeRestart(t *testing.T) { forEachEngine(t, testNodeProposeRestart) }

func testNodeProposeRestart(t *testing.T, engine string) {
	env := &nodeEnv{engine: engine, dir: t.TempDir(), addr: freeAddr(t)}
	n, db := env.start(t)
	if !n.IsLeader() {
		t.Fatal("a single replica is not its own leader")
	}
	first := propose(t, n, acq(R, "k", "a", "c1", time.Now().UnixMilli(), 60000, 0))
	if !first.Success() || first.Token == 0 {
		t.Fatalf("acquire: %+v", first)
	}
	if r := propose(t, n, acq(R, "k", "b", "c2", time.Now().UnixMilli(), 60000, 60000)); r.WaitPosition != 0 {
		t.Fatalf("queue: %+v", r)
	}
	if r := propose(t, n, rel(R, "k", "a", time.Now().UnixMilli())); !r.Success() {
		t.Fatalf("release: %+v", r)
	}
	env.mu.Lock()
	notes := fmt.Sprint(env.notes)
	env.mu.Unlock()
	if want := fmt.Sprint([]statemachine.Notification{{ConnID: "c2", Owner: "b", Kind: R, Key: "k", Token: first.Token + 2}}); notes != want {
		t.Fatalf("notifications %s, want %s", notes, want)
	}
	for i := range 50 {
		propose(t, n, acq(N, fmt.Sprint("bulk-", i), "o", "c1", time.Now().UnixMilli(), 600000, 0))
	}
	before, err := n.Stats()
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := n.Propose(ctx, acq(N, "late", "o", "c1", 1, 1, 0)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("propose after close: %v", err)
	}
	db.Close()

	n, db = env.start(t)
	defer db.Close()
	defer n.Close()
	after, err := n.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if after.Held != before.Held || after.Fence != before.Fence || after.Applied < before.Applied {
		t.Fatalf("after restart %+v, before %+v", after, before)
	}
	if l, err := n.Lock(R, "k"); err != nil || l.Owner != "b" || !l.Unclaimed {
		t.Fatalf("handed-off lock after restart: %+v %v", l, err)
	}
	if r := propose(t, n, acq(N, "fresh", "o", "c1", time.Now().UnixMilli(), 1000, 0)); r.Token <= before.Fence {
		t.Fatalf("token %d after restart not above fence %d", r.Token, before.Fence)
	}
	if exp, err := n.Expired(time.Now().UnixMilli()+10_000, 10); err != nil || len(exp) != 1 || exp[0].Key != "fresh" {
		t.Fatalf("expired leases: %+v %v", exp, err)
	}
}

// TestNodeLogIsPadded: with either log, the files a node's log writes
// through are padded by walfile past its entries (whole chunks), and the
// node restarts with every entry.
func TestNodeLogIsPadded(t *testing.T) {
	for _, raftLog := range []string{LogLockd, LogPebble} {
		t.Run(raftLog, func(t *testing.T) { testNodeLogIsPadded(t, raftLog) })
	}
}

func testNodeLogIsPadded(t *testing.T, raftLog string) {
	env := &nodeEnv{dir: t.TempDir(), addr: freeAddr(t), raftLog: raftLog}
	n, db := env.start(t)
	for i := range 20 {
		propose(t, n, acq(N, fmt.Sprint("pad-", i), "o", "c1", time.Now().UnixMilli(), 600000, 0))
	}
	var logs, padded []string
	err := filepath.WalkDir(filepath.Join(env.dir, "raft"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".log") {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		logs = append(logs, fmt.Sprintf("%s %d", filepath.Base(path), info.Size()))
		if info.Size() > 0 && info.Size()%walfile.Chunk == 0 {
			padded = append(padded, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(padded) == 0 {
		t.Fatalf("no write-ahead file of the log is padded: %v", logs)
	}
	n.Close()
	db.Close()
	n, db = env.start(t)
	defer db.Close()
	defer n.Close()
	if r := propose(t, n, acq(N, "pad-19", "other", "c2", time.Now().UnixMilli(), 600000, 0)); r.Success() {
		t.Fatalf("a lock taken before the restart was free after it: %+v", r)
	}
}

// TestNodeKeepsItsLog: a new data dir gets the log asked for (ours when
// none is), and keeps it whatever a later start asks; a data dir that
// dragonboat opened before the choice existed keeps pebble.
func TestNodeKeepsItsLog(t *testing.T) {
	for _, tc := range []struct {
		first, later, want string
		dropMarker         bool // a data dir from before the marker existed
	}{
		{"", LogPebble, LogLockd, false},
		{LogPebble, "", LogPebble, false},
		{LogPebble, LogLockd, LogPebble, true},
	} {
		t.Run(fmt.Sprintf("%s-then-%s-marker-dropped-%t", tc.first, tc.later, tc.dropMarker), func(t *testing.T) {
			env := &nodeEnv{dir: t.TempDir(), addr: freeAddr(t), raftLog: tc.first}
			n, db := env.start(t)
			propose(t, n, acq(N, "kept", "o", "c1", time.Now().UnixMilli(), 600000, 0))
			n.Close()
			db.Close()
			if tc.dropMarker {
				if err := os.Remove(filepath.Join(env.dir, "raft", raftLogMarker)); err != nil {
					t.Fatal(err)
				}
			}
			env.raftLog = tc.later
			n, db = env.start(t)
			defer db.Close()
			defer n.Close()
			if r := propose(t, n, acq(N, "kept", "other", "c2", time.Now().UnixMilli(), 600000, 0)); r.Success() {
				t.Fatalf("a lock taken before the restart was free after it: %+v", r)
			}
			got, err := chooseLog(filepath.Join(env.dir, "raft"), tc.later)
			if err != nil || got != tc.want {
				t.Fatalf("log %q %v, want %q", got, err, tc.want)
			}
			ours, _ := filepath.Glob(filepath.Join(env.dir, "raft", "*", "*", raftlog.DirName))
			if (len(ours) > 0) != (tc.want == LogLockd) {
				t.Fatalf("raftlog dirs %v with the log %s", ours, tc.want)
			}
		})
	}
}

// TestChooseLog: the marker decides; without one, dragonboat's flag file
// means a dir made with pebble; a new dir records the log asked for.
func TestChooseLog(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old")
	if err := os.MkdirAll(old, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, dragonboatFlagFile), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, err := chooseLog(old, LogLockd); err != nil || got != LogPebble {
		t.Fatalf("old dir: %q %v", got, err)
	}
	fresh := filepath.Join(dir, "fresh")
	if got, err := chooseLog(fresh, ""); err != nil || got != LogLockd {
		t.Fatalf("fresh dir: %q %v", got, err)
	}
	if got, err := chooseLog(fresh, LogPebble); err != nil || got != LogLockd {
		t.Fatalf("fresh dir again: %q %v", got, err)
	}
	if _, err := chooseLog(filepath.Join(dir, "x"), "rocksdb"); err == nil {
		t.Fatal("an unknown log was accepted")
	}
	if err := os.WriteFile(filepath.Join(fresh, raftLogMarker), []byte("tan\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := chooseLog(fresh, ""); err == nil {
		t.Fatal("a marker naming an unknown log was accepted")
	}
	if got := fmt.Sprint(settings.RaftLog.Choices); got != fmt.Sprint([]string{LogLockd, LogPebble}) {
		t.Fatalf("settings.RaftLog's choices %s are not the logs Start knows", got)
	}
}
