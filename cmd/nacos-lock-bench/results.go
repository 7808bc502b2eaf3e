package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"nacos-lockd/bench/load"
	"nacos-lockd/bench/peers"
)

// suiteResults is results.json: every report of a suite run and what its
// table needs besides them, so `nacos-lock-bench table` can render the
// table again (after a change to the table's code, or for the README)
// without measuring again.
type suiteResults struct {
	Machine string `json:"machine"`
	// Pinning is Pin's line, as the table prints it, for a reader of the
	// file; the table is rendered from Pin.
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
	if r.Pin == nil || r.Rounds == 0 || len(r.Targets) == 0 {
		return "", errors.New("no pinning, rounds or targets: written by a bench before `table` existed; run the suite again")
	}
	return ratioTable(r.Reports, r.Targets, r.Skipped, tableMeta{machine: r.Machine, rounds: r.Rounds, pin: *r.Pin, syncFloor: r.SyncFloor}), nil
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
