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
	"syscall"
	"time"

	"nacos-lockd/bench/load"
	"nacos-lockd/bench/peers"
)

// syncFloor is what one durable log write costs this machine: a record
// written into a pre-written file (as nacos-lockd's padded WAL files are,
// replica/walfile) and
// fdatasync'd, at a given rate. A replicated log pays it once per entry,
// whatever runs above it, so it is the floor under any server that syncs
// every entry (see the suite's fixed-rate table).
type syncFloor struct {
	Dir        string  `json:"dir"`
	Record     int     `json:"recordBytes"`
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

const syncFloorFileBytes = 64 << 20

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
	fmt.Fprintf(stdout, "%d synced %d-byte writes in %s (%.0f/s, scheduled %g/s): %.1f µs CPU per write, p50 %.3f ms, p99 %.3f ms\n",
		res.Writes, res.Record, duration, res.Achieved, res.RatePerSec, res.CPUUsPerWrite, res.P50Ms, res.P99Ms)
	return nil
}

func measureSyncFloor(ctx context.Context, dir string, record int, rate float64, duration time.Duration) (syncFloor, error) {
	res := syncFloor{Dir: dir, Record: record, RatePerSec: rate}
	f, err := os.CreateTemp(dir, "sync-floor-*")
	if err != nil {
		return res, fmt.Errorf("sync-floor: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	// Written and synced in full first, so the measured writes neither
	// allocate blocks nor grow the file: a recycled WAL segment.
	zero := make([]byte, 1<<20)
	for off := 0; off < syncFloorFileBytes; off += len(zero) {
		if _, err := f.Write(zero); err != nil {
			return res, fmt.Errorf("sync-floor: pre-write %s: %w", filepath.Base(f.Name()), err)
		}
	}
	if err := f.Sync(); err != nil {
		return res, fmt.Errorf("sync-floor: %w", err)
	}
	fd := int(f.Fd())
	buf := make([]byte, record)
	for i := range buf {
		buf[i] = byte(i)
	}
	var gap time.Duration
	if rate > 0 {
		gap = time.Duration(float64(time.Second) / rate)
	}
	var lat []time.Duration
	var off int64
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
		if _, err := syscall.Pwrite(fd, buf, off); err != nil {
			return res, fmt.Errorf("sync-floor: write: %w", err)
		}
		if err := syscall.Fdatasync(fd); err != nil {
			return res, fmt.Errorf("sync-floor: fdatasync: %w", err)
		}
		lat = append(lat, time.Since(t))
		if off += int64(record); off+int64(record) > syncFloorFileBytes {
			off = 0
		}
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
