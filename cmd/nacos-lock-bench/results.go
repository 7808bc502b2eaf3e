package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"nacos-lockd/bench/load"
	"nacos-lockd/bench/peers"
)

// suiteResults is results.json: every report of a suite run and what its
// table needs besides them, so `nacos-lock-bench table` can render the
// table again (after a change to the table's code, or for the README)
// without measuring again.
type suiteResults struct {
	Machine string `json:"machine"`
	// Pinning is the line the table prints; Pin the same, to compute with.
	Pinning string            `json:"pinning"`
	Pin     *peers.Pinning    `json:"pin,omitempty"`
	Rounds  int               `json:"rounds,omitempty"`
	Targets []string          `json:"targets,omitempty"` // as asked for, in order
	Skipped map[string]string `json:"skipped"`
	Reports []load.Report     `json:"reports"`
	// SyncFloor: one synced log write, back to back (syncfloor.go).
	SyncFloor *syncFloor `json:"syncFloor,omitempty"`
}

// table renders the results' table, as the suite printed it at the end of
// the run.
func (r suiteResults) table() (string, error) {
	pin := peers.Pinning{}
	switch {
	case r.Pin != nil:
		pin = *r.Pin
	default:
		p, err := pinningFromLine(r.Pinning)
		if err != nil {
			return "", err
		}
		pin = p
	}
	rounds := r.Rounds
	if rounds == 0 { // written before rounds were stored
		for _, rep := range r.Reports {
			rounds = max(rounds, rep.Round)
		}
	}
	targets := r.Targets
	if len(targets) == 0 { // written before targets were stored
		for _, rep := range r.Reports {
			if !slices.Contains(targets, rep.Target) {
				targets = append(targets, rep.Target)
			}
		}
		var skipped []string
		for t := range r.Skipped {
			if !slices.Contains(targets, t) {
				skipped = append(skipped, t)
			}
		}
		slices.Sort(skipped)
		targets = append(targets, skipped...)
	}
	return ratioTable(r.Reports, targets, r.Skipped, tableMeta{machine: r.Machine, rounds: rounds, pin: pin, syncFloor: r.SyncFloor}), nil
}

// pinLine reads back peers.Pinning's String, for results.json written
// before the pinning itself was stored.
var pinLine = regexp.MustCompile(`^servers pinned to CPU (\S+?)(?: \(it takes the interrupts of (\S+), which holds their data\))?, load generator \(this process and its client processes\) to CPU (\S+)$`)

func pinningFromLine(line string) (peers.Pinning, error) {
	if line == "" || line == (peers.Pinning{}).String() {
		return peers.Pinning{}, nil
	}
	m := pinLine.FindStringSubmatch(line)
	if m == nil {
		return peers.Pinning{}, fmt.Errorf("pinning %q: not a line this bench writes", line)
	}
	server, err := peers.ParseCPUSet(m[1])
	if err != nil {
		return peers.Pinning{}, fmt.Errorf("pinning %q: %w", line, err)
	}
	client, err := peers.ParseCPUSet(m[3])
	if err != nil {
		return peers.Pinning{}, fmt.Errorf("pinning %q: %w", line, err)
	}
	p := peers.Pinning{Server: server, Client: client}
	if m[2] != "" && len(server) == 1 {
		p.Disk = &peers.DiskIRQ{Device: m[2], CPU: server[0]}
	}
	return p, nil
}

// runTable is `nacos-lock-bench table`: the table of a suite run, rendered
// again from its results.json.
func runTable(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nacos-lock-bench table", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("results", "bench/results/results.json", "a suite run's results.json")
	out := fs.String("out", "", "also write the table to this file (table.md)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	b, err := os.ReadFile(*in)
	if err != nil {
		return fmt.Errorf("read results: %w", err)
	}
	var r suiteResults
	if err := json.Unmarshal(b, &r); err != nil {
		return fmt.Errorf("read %s: %w", *in, err)
	}
	if len(r.Reports) == 0 {
		return fmt.Errorf("%s: no reports (not a suite run's results.json?)", *in)
	}
	table, err := r.table()
	if err != nil {
		return fmt.Errorf("%s: %w", *in, err)
	}
	if *out != "" {
		if err := os.WriteFile(filepath.Clean(*out), []byte(table), 0o644); err != nil {
			return fmt.Errorf("write table: %w", err)
		}
	}
	_, err = io.WriteString(stdout, table)
	return err
}
