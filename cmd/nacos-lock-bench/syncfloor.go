package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/vfs"

	"nacos-lockd/bench/load"
	"nacos-lockd/bench/peers"
	"nacos-lockd/replica/walfile"
)

// syncFloor is what one durable log write costs this machine: a record
// written and synced the way nacos-lockd's log writes each entry, through
// replica/walfile (a file padded ahead of its writer; a direct,
// synchronous write where the file system allows O_DIRECT, else a write
// and fdatasync), at a given rate. A replicated log pays it once per
// entry, whatever runs above it, so it is the floor under any server that
// syncs every entry (see the suite's fixed-rate table).
type syncFloor struct {
	Dir    string `json:"dir"`
	Record int    `json:"recordBytes"`
	// Direct: the writes were direct (O_DIRECT|O_DSYNC), not through the
	// page cache and fdatasync.
	Direct     bool    `json:"direct"`
	RatePerSec float64 `json:"ratePerSecond"` // scheduled; 0: back to back
	Achieved   float64 `json:"achievedPerSecond"`
	Writes     int     `json:"writes"`
	// CPUUsPerWrite is this process's CPU (user + system) per synced
	// write, the pacing's sleeps and wake-ups included: a server idle
	// between entries pays those too.
	CPUUsPerWrite float64 `json:"cpuUsPerWrite"`
	P50Ms         float64 `json:"p50Ms"`
	P99Ms         float64 `json:"p99Ms"`
}

func runSyncFloor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nacos-lock-bench sync-floor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	rate := fs.Float64("rate", 0, "synced writes per second, evenly spaced (0: back to back)")
	duration := fs.Duration("duration", 5*time.Second, "measured time")
	record := fs.Int("record", 512, "bytes per write (a small Raft entry and its framing)")
	dir := fs.String("dir", ".", "directory for the file: on the file system the server's data dir is on")
	var cpus peers.CPUSet
	fs.Func("cpus", "pin this process to these CPUs, e.g. the server's, to compare with it", cpuFlag(&cpus))
	asJSON := fs.Bool("json", false, "print the result as JSON")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *record < 1 || *record > 1<<20 || *rate < 0 || *duration <= 0 {
		return errors.New("sync-floor: want --record 1..1048576, --rate >= 0 and --duration > 0")
	}
	if err := peers.PinSelf(cpus); err != nil {
		return fmt.Errorf("--cpus: %w", err)
	}
	res, err := measureSyncFloor(ctx, *dir, *record, *rate, *duration)
	if err != nil {
		return err
	}
	if *asJSON {
		return json.NewEncoder(stdout).Encode(res)
	}
	fmt.Fprintf(stdout, "%d synced %d-byte writes (%s) in %s (%.0f/s, scheduled %g/s): %.1f µs CPU per write, p50 %.3f ms, p99 %.3f ms\n",
		res.Writes, res.Record, res.how(), duration, res.Achieved, res.RatePerSec, res.CPUUsPerWrite, res.P50Ms, res.P99Ms)
	return nil
}

// how names the way the writes were made durable.
func (f syncFloor) how() string {
	if f.Direct {
		return "direct I/O"
	}
	return "page cache + fdatasync"
}

func measureSyncFloor(ctx context.Context, dir string, record int, rate float64, duration time.Duration) (syncFloor, error) {
	res := syncFloor{Dir: dir, Record: record, RatePerSec: rate}
	tmp, err := os.MkdirTemp(dir, "sync-floor-*")
	if err != nil {
		return res, fmt.Errorf("sync-floor: %w", err)
	}
	defer os.RemoveAll(tmp)
	// A log file as the server's log opens it: padded ahead of the
	// writer (the padding's own writes are part of the cost, as there).
	f, err := walfile.FS{FS: vfs.Default}.Create(filepath.Join(tmp, "000001.log"))
	if err != nil {
		return res, fmt.Errorf("sync-floor: %w", err)
	}
	defer f.Close()
	res.Direct = walfile.IsDirect(f)
	buf := make([]byte, record)
	for i := range buf {
		buf[i] = byte(i)
	}
	var gap time.Duration
	if rate > 0 {
		gap = time.Duration(float64(time.Second) / rate)
	}
	var lat []time.Duration
	self := load.Self()
	cpu0, start := load.CPUSeconds(self), time.Now()
	next := start
	for time.Since(start) < duration && ctx.Err() == nil {
		if gap > 0 {
			next = next.Add(gap)
			if d := time.Until(next); d > 0 {
				time.Sleep(d)
			}
		}
		t := time.Now()
		if _, err := f.Write(buf); err != nil {
			return res, fmt.Errorf("sync-floor: write: %w", err)
		}
		if err := f.Sync(); err != nil {
			return res, fmt.Errorf("sync-floor: sync: %w", err)
		}
		lat = append(lat, time.Since(t))
	}
	elapsed := time.Since(start)
	cpu := load.CPUSeconds(self) - cpu0
	if len(lat) == 0 {
		return res, errors.New("sync-floor: no write finished")
	}
	slices.Sort(lat)
	res.Writes = len(lat)
	res.Achieved = float64(len(lat)) / elapsed.Seconds()
	res.CPUUsPerWrite = cpu * 1e6 / float64(len(lat))
	res.P50Ms, res.P99Ms = load.Pct(lat, 0.50), load.Pct(lat, 0.99)
	return res, nil
}
