package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nacos-lockd/bench/load"
	"nacos-lockd/bench/peers"
)

// A results.json as the suite writes it renders the table the suite
// printed, with everything the table reads besides the reports: the
// pinning (the pinned notes and checklist), the rounds, the targets' order
// and the skipped targets.
func TestTableRendersAgainFromResults(t *testing.T) {
	reps, targets := syntheticRun()
	for i := range reps {
		reps[i].Round = 1 + i%2 // two rounds, so the rounds note shows
	}
	skipped := map[string]string{"redis-fsync-always": "no redis"}
	targets = append(targets, "redis-fsync-always")
	pin := peers.Pinning{Server: peers.CPUSet{1}, Client: peers.CPUSet{0}, Disk: &peers.DiskIRQ{Device: "vda", CPU: 1}}
	want := ratioTable(reps, targets, skipped, tableMeta{machine: "test box", rounds: 2, pin: pin})
	b, err := json.Marshal(suiteResults{Machine: "test box", Pinning: pin.String(), Pin: &pin, Rounds: 2, Targets: targets,
		Skipped: skipped, Reports: reps})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "results.json")
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "table.md")
	var stdout bytes.Buffer
	if err := runTable([]string{"--results", file, "--out", out}, &stdout, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if stdout.String() != want {
		t.Fatalf("rendered again:\n%s\nwant:\n%s", stdout.String(), want)
	}
	if got, err := os.ReadFile(out); err != nil || string(got) != want {
		t.Fatalf("--out file: %v\n%s", err, got)
	}
	for _, line := range []string{"Pinning: servers pinned to CPU 1 (it takes the interrupts of vda", "2 interleaved rounds", "redis-fsync-always", "no redis"} {
		if !strings.Contains(want, line) {
			t.Errorf("the table lacks %q, so this test does not check it", line)
		}
	}
}

func TestTableRefusesWhatIsNotAResultsFile(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.json")
	if err := os.WriteFile(empty, []byte(`{"machine": "m", "reports": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	// Written before the pinning, rounds and targets were stored: the
	// table cannot be told from the reports alone.
	older := filepath.Join(dir, "older.json")
	b, err := json.Marshal(map[string]any{"machine": "m", "pinning": "unpinned", "reports": []load.Report{{Target: "nacos-lockd", Workload: "w1", Clients: 1, Ops: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(older, b, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, file := range []string{empty, older, filepath.Join(dir, "missing.json")} {
		if err := runTable([]string{"--results", file}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
			t.Errorf("%s: rendered", file)
		}
	}
}
