package server

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/compat"
	"nacos-lockd/internal/durable"
	"nacos-lockd/interop/procs"
	"nacos-lockd/statemachine"
	"nacos-lockd/storage"
)

// These tests build real nodes: badger storage and dragonboat replicas on
// loopback ports (main port P, SDK P+1000, Raft P-1000).

// recorder records the lifecycle steps (Config.trace).
type recorder struct {
	mu    sync.Mutex
	steps []string
}

func (r *recorder) step(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.steps = append(r.steps, s)
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.steps)
}

func member(port int) compat.Member {
	return compat.Member{Host: "127.0.0.1", Port: port, RaftPort: port - 1000}
}

func testConfig(t *testing.T, self compat.Member, dir string) Config {
	t.Helper()
	lock, err := compat.LockSettingsFrom(compat.Properties{})
	if err != nil {
		t.Fatal(err)
	}
	return Config{Self: self, Members: []compat.Member{self}, DataDir: dir, Lock: lock, Log: zerolog.Nop(), Version: "test"}
}

// running is a server whose Run is in a goroutine.
type running struct {
	*Server
	stop context.CancelFunc
	done chan error
	once sync.Once
	err  error // Run's, once wait has returned
}

// wait returns Run's error once it has returned.
func (r *running) wait() error {
	r.once.Do(func() { r.err = <-r.done })
	return r.err
}

// start builds and runs a server, and waits until it is ready.
func start(t *testing.T, cfg Config) *running { return startAll(t, cfg)[0] }

// startAll builds and runs servers that may need each other to be ready
// (the initial members of a cluster), and waits until all are.
func startAll(t *testing.T, cfgs ...Config) []*running {
	t.Helper()
	var rs []*running
	for _, cfg := range cfgs {
		ctx, cancel := context.WithCancel(context.Background())
		s, err := New(ctx, cfg)
		if err != nil {
			cancel()
			t.Fatalf("New: %v", err)
		}
		r := &running{Server: s, stop: cancel, done: make(chan error, 1)}
		go func() { r.done <- s.Run(ctx) }()
		t.Cleanup(func() {
			if err := r.shutdown(); err != nil {
				t.Errorf("Run: %v", err)
			}
		})
		rs = append(rs, r)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, r := range rs {
		for !r.Ready() {
			select {
			case err := <-r.done:
				r.done <- err
				t.Fatalf("Run ended before ready: %v", err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatal("not ready after 60s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return rs
}

// shutdown stops Run, then closes; safe to call twice.
func (r *running) shutdown() error {
	r.stop()
	err := r.wait()
	r.Close()
	return err
}

func TestCoalesceWindowOff(t *testing.T) {
	if coalesceWindow(0) >= 0 || coalesceWindow(time.Millisecond) != time.Millisecond {
		t.Fatalf("coalesce window 0 maps to %s, 1ms to %s", coalesceWindow(0), coalesceWindow(time.Millisecond))
	}
}

// The Raft clock: a single node ticks as seldom as its election timeout
// allows (three ticks to it), a cluster keeps about ten ticks to the
// timeout; the election timeout itself stays what was set, to a tick.
func TestRaftTiming(t *testing.T) {
	self := compat.Member{Host: "127.0.0.1", Port: 8850, RaftPort: 7850}
	for _, c := range []struct {
		cluster, join             bool
		electionMs                int64
		rtt, election, heartbeats uint64
	}{
		{false, false, 0, 10, 3, 1}, // the single node's default, 30 ms
		{false, false, 10, 3, 3, 1}, // the least that may be set
		{false, false, 600, 200, 3, 1},
		{true, false, 0, 5, 60, 6}, // the cluster's default, 300 ms
		{true, false, 20, 1, 20, 2},
		{true, true, 0, 5, 60, 6}, // joining: a cluster member's clock
	} {
		cfg := Config{Self: self, Cluster: c.cluster, Join: c.join}
		cfg.Lock.ElectionTimeoutMs = c.electionMs
		rc := raftConfig(cfg, t.TempDir(), 1, nil)
		if rc.RTTMillisecond != c.rtt || rc.ElectionRTT != c.election || rc.HeartbeatRTT != c.heartbeats {
			t.Errorf("cluster %v, election %d ms: tick %d ms, election %d ticks, heartbeat %d ticks; want %d, %d, %d",
				c.cluster, c.electionMs, rc.RTTMillisecond, rc.ElectionRTT, rc.HeartbeatRTT, c.rtt, c.election, c.heartbeats)
		}
	}
}

// A node's first replica id: 1 alone; in a cluster, the one every member
// derives from its cluster.conf address (so all agree without talking).
func TestBootstrapReplicaID(t *testing.T) {
	self := compat.Member{Host: "127.0.0.1", Port: 8850, RaftPort: 7850}
	if id := (Config{Self: self}).bootstrapReplicaID(); id != 1 {
		t.Fatalf("single node: id %d, want 1", id)
	}
	id := (Config{Self: self, Cluster: true}).bootstrapReplicaID()
	if id == 1 || id != self.ReplicaID() {
		t.Fatalf("cluster member: id %d, want its address's %d", id, self.ReplicaID())
	}
	other := compat.Member{Host: "127.0.0.1", Port: 8852, RaftPort: 7852}
	if id == (Config{Self: other, Cluster: true}).bootstrapReplicaID() {
		t.Fatal("two members of one cluster.conf derive the same id")
	}
}

// Shutdown: the gateway stops taking requests and hands over (Run
// returns) while the node still runs; Close then closes the node, and
// storage last. The build order is storage, node, gateway, admin.
func TestBuildAndShutdownOrder(t *testing.T) {
	port := procs.FreePorts(t, 1)[0]
	rec := &recorder{}
	cfg := testConfig(t, member(port), t.TempDir())
	cfg.trace = rec.step
	r := start(t, cfg)
	if got, want := rec.get(), []string{"storage opened", "node started", "gateway built", "admin built", "ready"}; !slices.Equal(got, want) {
		t.Fatalf("start steps %v, want %v", got, want)
	}
	sdk := net.JoinHostPort("127.0.0.1", strconv.Itoa(port+1000))
	if c, err := net.DialTimeout("tcp", sdk, time.Second); err != nil {
		t.Fatalf("SDK port before shutdown: %v", err)
	} else {
		c.Close()
	}

	r.stop()
	if err := r.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// Between Run and Close: no more requests, the node still answers.
	if c, err := net.DialTimeout("tcp", sdk, time.Second); err == nil {
		c.Close()
		t.Fatal("the SDK port still accepts connections after Run returned")
	}
	if _, err := r.node.Stats(); err != nil {
		t.Fatalf("node closed before Close: %v", err)
	}
	r.Close()
	steps := rec.get()
	if got, want := steps[len(steps)-3:], []string{"gateway stopped", "node closed", "storage closed"}; !slices.Equal(got, want) {
		t.Fatalf("shutdown steps %v, want ... %v", steps, want)
	}
	r.Close() // twice is fine
	if got := rec.get(); len(got) != len(steps) {
		t.Fatalf("second Close did more: %v", got)
	}
}

// A start that fails after storage opened closes what it built: the data
// dir can be opened again at once.
func TestNewClosesOnFailure(t *testing.T) {
	port := procs.FreePorts(t, 1)[0]
	rec := &recorder{}
	cfg := testConfig(t, member(port), t.TempDir())
	cfg.trace = rec.step
	cfg.TLS.GRPC = compat.TLSFiles{Enabled: true, CertFile: "/nonexistent.pem", KeyFile: "/nonexistent.key"}
	if _, err := New(context.Background(), cfg); err == nil {
		t.Fatal("New with a missing certificate succeeded")
	}
	if got, want := rec.get(), []string{"storage opened", "storage closed"}; !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	db, err := storage.Open(storage.Config{Dir: filepath.Join(cfg.DataDir, LocksDir)})
	if err != nil {
		t.Fatalf("storage still held: %v", err)
	}
	db.Close()
}

// installTable does what --import-nacos does to an empty data dir: one
// held lock installed as the whole table, with an import marker.
func installTable(t *testing.T, dir string) func() error {
	return func() error {
		tab := statemachine.NewTable()
		res := tab.Apply(1, statemachine.Command{Op: statemachine.OpAcquire, Kind: statemachine.KindNonReentrant, Key: "imported",
			Owner: "o", ConnID: "c-o", NowMs: time.Now().UnixMilli(), LeaseMs: 600_000})
		if !res.Success() {
			t.Errorf("acquire in the table: %+v", res)
		}
		db, err := storage.Open(storage.Config{Dir: filepath.Join(dir, LocksDir)})
		if err != nil {
			return err
		}
		if err := statemachine.InstallFresh(db, tab); err != nil {
			db.Close()
			return err
		}
		if err := db.Close(); err != nil {
			return err
		}
		return durable.CreateFile(filepath.Join(dir, ImportMarker), []byte(`{"checksum":"x"}`+"\n"))
	}
}

// Seal after import: the first start on an installed table seals it into
// a snapshot before the gateway serves and records it; a restart on the
// sealed dir starts as any other, without sealing again, and keeps the
// table.
func TestSealAfterImport(t *testing.T) {
	port, dir := procs.FreePorts(t, 1)[0], t.TempDir()
	rec := &recorder{}
	cfg := testConfig(t, member(port), dir)
	cfg.trace = rec.step
	cfg.Install = installTable(t, dir)
	r := start(t, cfg)
	if got, want := rec.get(), []string{"storage opened", "node started", "gateway built", "admin built", "sealed", "ready"}; !slices.Equal(got, want) {
		t.Fatalf("steps %v, want %v", got, want)
	}
	if SealPending(dir) {
		t.Fatal("still pending after the sealed start")
	}
	sealedAt, err := os.ReadFile(filepath.Join(dir, SealedMarker))
	if err != nil {
		t.Fatal(err)
	}
	if st, _ := r.node.Stats(); st.Locks != 1 {
		t.Fatalf("%d locks after the import, want 1", st.Locks)
	}
	if err := r.shutdown(); err != nil {
		t.Fatal(err)
	}

	rec2 := &recorder{}
	cfg.trace, cfg.Install = rec2.step, nil
	r = start(t, cfg)
	if slices.Contains(rec2.get(), "sealed") {
		t.Fatalf("sealed again on restart: %v", rec2.get())
	}
	if again, _ := os.ReadFile(filepath.Join(dir, SealedMarker)); string(again) != string(sealedAt) {
		t.Fatalf("seal marker rewritten: %q, was %q", again, sealedAt)
	}
	if st, _ := r.node.Stats(); st.Locks != 1 {
		t.Fatalf("%d locks after the restart, want 1", st.Locks)
	}
}

func members(t *testing.T, s *Server) map[uint64]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	m, err := s.node.Membership(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Join: a new member asks a running member to add it and starts with the
// replica id it was given; a restart keeps it. Rejoin with a wiped data
// dir: the same address joins again under a new id, which replaces the
// old one (a removed id never comes back). Two initial members keep a
// quorum while the third is down.
func TestJoinAndRejoinWiped(t *testing.T) {
	ports := procs.FreePorts(t, 3)
	a, c, b := member(ports[0]), member(ports[1]), member(ports[2])
	initial := []compat.Member{a, c}
	var cfgs []Config
	for _, m := range initial {
		cfg := testConfig(t, m, t.TempDir())
		cfg.Cluster, cfg.Members = true, initial
		cfgs = append(cfgs, cfg)
	}
	first := startAll(t, cfgs...)[0]

	dirB := t.TempDir()
	cfgB := testConfig(t, b, dirB)
	cfgB.Cluster, cfgB.Join, cfgB.Members = true, true, []compat.Member{a, c, b}
	joined := start(t, cfgB)
	idB := joined.ReplicaID()
	if idB == 0 || idB == a.ReplicaID() || idB == c.ReplicaID() {
		t.Fatalf("joined with replica id %d (initial members %d, %d)", idB, a.ReplicaID(), c.ReplicaID())
	}
	if m := members(t, first.Server); len(m) != 3 || m[idB] != b.RaftAddress() {
		t.Fatalf("members after the join: %v", m)
	}
	if err := joined.shutdown(); err != nil {
		t.Fatal(err)
	}

	// A restart with --join still set reads its id from the data dir.
	again := start(t, cfgB)
	if again.ReplicaID() != idB {
		t.Fatalf("restart took replica id %d, want its own %d", again.ReplicaID(), idB)
	}
	if err := again.shutdown(); err != nil {
		t.Fatal(err)
	}

	if err := os.RemoveAll(dirB); err != nil {
		t.Fatal(err)
	}
	rejoined := start(t, cfgB)
	idB2 := rejoined.ReplicaID()
	if idB2 == idB || idB2 == 0 {
		t.Fatalf("rejoined with replica id %d, want a new one (was %d)", idB2, idB)
	}
	m := members(t, first.Server)
	if _, old := m[idB]; old || len(m) != 3 || m[idB2] != b.RaftAddress() {
		t.Fatalf("members after the rejoin: %v (old id %d, new %d)", m, idB, idB2)
	}
}
