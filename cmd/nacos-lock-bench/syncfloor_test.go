package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacos-lockd/bench/load"
	"nacos-lockd/bench/peers"
)

func TestSyncFloorMeasuresSyncedWrites(t *testing.T) {
	dir := t.TempDir()
	f, err := measureSyncFloor(context.Background(), dir, 512, 0, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if f.Writes == 0 || f.CPUUsPerWrite <= 0 || f.P50Ms <= 0 || f.P99Ms < f.P50Ms || f.Record != 512 {
		t.Fatalf("back to back: %+v", f)
	}
	// It writes as the server's log does: directly wherever the file
	// system takes O_DIRECT.
	if d, err := os.OpenFile(filepath.Join(dir, "probe"), os.O_CREATE|os.O_WRONLY|syscall.O_DIRECT, 0o644); (err == nil) != f.Direct {
		t.Fatalf("direct writes %v, but O_DIRECT in %s: %v", f.Direct, dir, err)
	} else if err == nil {
		d.Close()
		os.Remove(d.Name())
	}
	// Paced: the schedule holds, give or take a loaded machine's timers.
	f, err = measureSyncFloor(context.Background(), dir, 100, 100, 500*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if f.RatePerSec != 100 || f.Achieved < 40 || f.Achieved > 130 {
		t.Fatalf("at 100/s: %+v", f)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("left %d files behind", len(left))
	}
}

func TestSyncFloorCommand(t *testing.T) {
	var out, errOut bytes.Buffer
	args := []string{"sync-floor", "--json", "--dir", t.TempDir(), "--duration", "200ms", "--rate", "200"}
	if err := dispatch(context.Background(), args, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	var f syncFloor
	if err := json.Unmarshal(out.Bytes(), &f); err != nil || f.Writes == 0 || f.RatePerSec != 200 {
		t.Fatalf("%v: %s", err, out.String())
	}
	for _, bad := range [][]string{{"--record", "0"}, {"--rate", "-1"}, {"--duration", "0s"}} {
		if err := dispatch(context.Background(), append([]string{"sync-floor", "--dir", t.TempDir()}, bad...), &out, &errOut); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// With the sync floor measured, the fixed-rate section does the
// arithmetic and the check says where the floor is.
func TestRatioTableSyncFloor(t *testing.T) {
	reps, targets := syntheticRun()
	for i := range reps {
		if reps[i].Target == "nacos-lockd" && reps[i].Workload == "w1" && reps[i].Clients == 64 {
			reps[i].Extra = map[string]float64{"raftEntriesPerOp": 0.7} // at 1500 pairs/s
			if reps[i].RatePerSec == 0 {
				reps[i].Extra["raftEntriesPerOp"] = 0.1 // closed loop: more per entry
			}
		}
	}
	floor := &syncFloor{Record: 512, Achieved: 5000, Writes: 15000, CPUUsPerWrite: 50, P50Ms: 0.2}
	pin := peers.Pinning{Server: peers.CPUSet{0}, Client: peers.CPUSet{1}}
	got := ratioTable(reps, targets, map[string]string{}, tableMeta{machine: "test box", rounds: 1, pin: pin, syncFloor: floor})
	wantLines(t, got,
		"nacos-lockd wrote 0.70 Raft entries per pair here, one synced write each.",
		"One synced 512-byte write as the log makes it (page cache + fdatasync, into a file padded ahead)",
		"cost 50.0 µs of CPU (p50 0.2 ms), so its syncs cost at least 35.0 µs per pair",
		"grpc-noop's 100 µs plus that is 135 µs, 1.35x grpc-noop's: the floor for a grpc-go server that syncs as often. nacos-lockd: 130 µs (1.30x).",
		"- W1 c=64 server CPU per pair <= 1.25x grpc-noop's at 1500 pairs/s: NOT MET (1.30x: 130 vs 100 µs per pair; its log's syncs alone put the floor at 1.35x)",
		"- W1 c=64 server CPU per pair <= 1.25x grpc-noop's (closed loop): MET (1.25x: 100 vs 80.0 µs per pair; its log's syncs alone put the floor at 1.06x)",
	)
	// With nacos-lockd's own wire measured too, the floor is that wire
	// plus the syncs, with grpc-go's beside it.
	withWire := append(reps,
		load.Report{Target: "h2grpc-noop", Workload: "w1", Clients: 64, Ops: 1000, OpsPerSec: 25000, P50Ms: 1.5, ServerCPUPerOp: 48, FIFOViolations: -1},
		load.Report{Target: "h2grpc-noop", Workload: "w1", Clients: 64, RatePerSec: 1500, Ops: 1000, OpsPerSec: 1500, P50Ms: 0.3, ServerCPUPerOp: 70, FIFOViolations: -1})
	got = ratioTable(withWire, append(targets, "h2grpc-noop"), map[string]string{}, tableMeta{machine: "test box", rounds: 1, pin: pin, syncFloor: floor})
	wantLines(t, got,
		"grpc-noop's 100 µs plus that is 135 µs, 1.35x grpc-noop's: the floor for a grpc-go server that syncs as often. "+
			"nacos-lockd's own wire (h2grpc-noop, 70.0 µs) plus the syncs is 105 µs, 1.05x grpc-noop's: the floor for nacos-lockd with nothing but its wire and its syncs. nacos-lockd: 130 µs (1.30x).",
		"- W1 c=64 server CPU per pair <= 1.25x grpc-noop's at 1500 pairs/s: NOT MET (1.30x: 130 vs 100 µs per pair; its own wire and its log's syncs alone are 1.05x (grpc-go's wire and the syncs 1.35x))",
		"- W1 c=64 server CPU per pair <= 1.25x grpc-noop's (closed loop): MET (1.25x: 100 vs 80.0 µs per pair; its own wire and its log's syncs alone are 0.66x (grpc-go's wire and the syncs 1.06x))",
	)
	// A build that counts its log's synced writes: the floor takes the
	// count, not the entries (a record may hold several).
	counted := slices.Clone(reps)
	for i := range counted {
		if counted[i].Target == "nacos-lockd" && counted[i].Workload == "w1" && counted[i].Clients == 64 && counted[i].RatePerSec == 1500 {
			counted[i].Extra = map[string]float64{"raftEntriesPerOp": 0.7, "logSyncsPerOp": 0.5}
		}
	}
	got = ratioTable(counted, targets, map[string]string{}, tableMeta{machine: "test box", rounds: 1, pin: pin, syncFloor: floor})
	wantLines(t, got,
		"nacos-lockd made 0.50 synced log writes per pair here (0.70 entries).",
		"cost 50.0 µs of CPU (p50 0.2 ms), so its syncs cost at least 25.0 µs per pair",
		"- W1 c=64 server CPU per pair <= 1.25x grpc-noop's at 1500 pairs/s: NOT MET (1.30x: 130 vs 100 µs per pair; its log's syncs alone put the floor at 1.25x)",
	)
	// Without a floor for the rate, no note and the plain check.
	plain := ratioTable(reps, targets, map[string]string{}, tableMeta{machine: "test box", rounds: 1, pin: pin})
	if strings.Contains(plain, "The log's syncs") || strings.Contains(plain, "put the floor at") {
		t.Fatalf("a sync floor note without a floor:\n%s", plain)
	}
}
