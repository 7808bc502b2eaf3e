package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"nacos-lockd/compat"
	"nacos-lockd/statemachine"
	"nacos-lockd/storage"
)

// Limits for reading snapshot files from disk: far above any real lock
// table, low enough that a corrupt file cannot exhaust memory.
const (
	snapshotMaxArchive = 1 << 30
	snapshotMaxContent = 2 << 30
)

const snapshotUsage = `usage:
  nacos-lockd snapshot inspect <dir or file> [--keys]
  nacos-lockd snapshot export --data-dir <dir> --out <new snapshot dir>
  nacos-lockd snapshot restore --in <dir or file> --data-dir <empty dir>

A snapshot directory holds nacos_lock.zip and __raft_snapshot_meta, as Nacos
writes them; export writes one, and inspect and restore also take the zip alone.
export and restore work on the files of a stopped node.`

// runSnapshot is `nacos-lockd snapshot inspect|export|restore`.
func runSnapshot(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, snapshotUsage)
		return errors.New("snapshot: want inspect, export or restore")
	}
	switch args[0] {
	case "inspect":
		return snapshotInspect(args[1:], stdout, stderr)
	case "export":
		return snapshotExport(args[1:], stdout, stderr)
	case "restore":
		return snapshotRestore(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, snapshotUsage)
		return nil
	}
	fmt.Fprintln(stderr, snapshotUsage)
	return fmt.Errorf("snapshot: unknown command %q", args[0])
}

// parseMixed parses flags that may come before or after the positional
// arguments (inspect <file> --keys), and returns the positionals.
func parseMixed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

func newSnapshotFlags(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("nacos-lockd snapshot "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), snapshotUsage)
		fs.PrintDefaults()
	}
	return fs
}

func snapshotInspect(args []string, stdout, stderr io.Writer) error {
	fs := newSnapshotFlags("inspect", stderr)
	keys := fs.Bool("keys", false, "list every lock")
	pos, err := parseMixed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return errors.New("snapshot inspect: want exactly one snapshot directory or file")
	}
	path := pos[0]
	var out bytes.Buffer
	check, err := storage.ReadSnapshotPath(path, snapshotMaxArchive, snapshotMaxContent, func(r io.Reader, check storage.ArchiveCheck) error {
		content, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		fmt.Fprintf(&out, "file: %s\n", path)
		writeCheck(&out, check)
		if bytes.HasPrefix(content, []byte("nacos-lockd-locks\n")) {
			t, version, err := statemachine.ReadSnapshot(bytes.NewReader(content))
			if err != nil {
				return err
			}
			fmt.Fprintf(&out, "format: nacos-lockd snapshot, version %d (this build writes %d, or %d for a table above cluster level %d)\n",
				version, statemachine.BaselineSnapshotVersion, statemachine.SnapshotVersion, statemachine.LevelBaseline)
			fmt.Fprintf(&out, "cluster level: %d\n", t.Level())
			writeTableSummary(&out, t, *keys)
			return nil
		}
		return inspectNacos(&out, content, *keys)
	})
	if err != nil {
		return fmt.Errorf("snapshot inspect %s: %w", path, err)
	}
	_ = check
	_, err = stdout.Write(out.Bytes())
	return err
}

func writeCheck(w io.Writer, check storage.ArchiveCheck) {
	if check.Verified() {
		fmt.Fprintf(w, "checksum: %s verified (%s)\n", check.Computed, check.Source)
	} else {
		fmt.Fprintf(w, "checksum: %s not recorded, not verified\n", check.Computed)
	}
}

func fmtTime(ms int64) string {
	return fmt.Sprintf("%d (%s)", ms, time.UnixMilli(ms).UTC().Format(time.RFC3339Nano))
}

func writeTableSummary(w io.Writer, t *statemachine.Table, keys bool) {
	st := t.Stats()
	fmt.Fprintf(w, "applied index: %d\nclock: %s\nfence: %d\ntoken base: %d\n", st.Applied, fmtTime(st.Clock), st.Fence, st.TokenBase)
	locks := t.Locks()
	byType := map[string]int{}
	unclaimed := 0
	var oldest, newest int64
	for i, l := range locks {
		byType[l.Type]++
		if l.Unclaimed {
			unclaimed++
		}
		if i == 0 || l.LeaseEndMs < oldest {
			oldest = l.LeaseEndMs
		}
		if i == 0 || l.LeaseEndMs > newest {
			newest = l.LeaseEndMs
		}
	}
	fmt.Fprintf(w, "locks: %d held (%d handed to a waiter, not yet claimed), %d waiters\n", st.Held, unclaimed, st.Queued)
	fmt.Fprintf(w, "by type: %s\n", countList(byType))
	if len(locks) > 0 {
		fmt.Fprintf(w, "lease ends: oldest %s, newest %s\n", fmtTime(oldest), fmtTime(newest))
	}
	if !keys {
		return
	}
	for _, l := range locks {
		extra := ""
		if l.Unclaimed {
			extra = " unclaimed"
		}
		fmt.Fprintf(w, "lock %s %q owner=%q conn=%q count=%d lease_end=%d token=%d waiters=%d%s\n",
			l.Type, l.Key, l.Owner, l.ConnID, l.Count, l.LeaseEndMs, l.Token, len(l.Waiters), extra)
		for i, wt := range l.Waiters {
			fmt.Fprintf(w, "  waiter %d owner=%q conn=%q deadline=%d\n", i, wt.Owner, wt.ConnID, wt.DeadlineMs)
		}
	}
}

// inspectNacos describes a Nacos lock snapshot and what importing it now
// would keep.
func inspectNacos(w io.Writer, content []byte, keys bool) error {
	now := importNowMs()
	locks, rep, err := compat.DecodeNacosSnapshot(content, compat.NacosImportOptions{NowMs: now})
	if err != nil {
		return err
	}
	t, sum, err := statemachine.NewImportedTable(locks, now)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "format: Nacos lock snapshot, %s, %s of %d entries\n", rep.Generation, rep.MapType, rep.Entries)
	fmt.Fprintf(w, "by class: %s\nby type: %s\n", countList(rep.ByClass), countList(rep.ByType))
	fmt.Fprintf(w, "an import at %s would keep %d locks (held %d, legacy-migrated %d, handed to their first waiter %d), drop %d expired and %d free, keep %d of %d waiters\n",
		time.UnixMilli(now).UTC().Format(time.RFC3339), sum.Locks, sum.Held, rep.LegacyMigrated, sum.HandedOff,
		rep.ExpiredDropped+sum.Expired, rep.FreeDropped+sum.Free, sum.Waiters, rep.WaitersRead)
	writeTableSummary(w, t, keys)
	return nil
}

func countList(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func snapshotExport(args []string, stdout, stderr io.Writer) error {
	fs := newSnapshotFlags("export", stderr)
	dataDir := fs.String("data-dir", "", "data directory of a stopped node")
	out := fs.String("out", "", "snapshot directory to create (must not exist or be empty)")
	pos, err := parseMixed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(pos) > 0 || *dataDir == "" || *out == "" {
		return errors.New("snapshot export: want --data-dir <dir> --out <dir>")
	}
	t, err := loadDataDir(*dataDir)
	if err != nil {
		return fmt.Errorf("snapshot export: %w", err)
	}
	st := t.Stats()
	sum, err := storage.WriteSnapshotDir(*out, storage.SnapshotDirMeta{LastIncludedIndex: int64(st.Applied)}, t.WriteSnapshot)
	if err != nil {
		return fmt.Errorf("snapshot export: %w", err)
	}
	_, err = fmt.Fprintf(stdout, "exported %d locks (%d waiters, applied index %d, fence %d) from %s to %s\nchecksum: %s (recorded in %s)\n",
		st.Locks, st.Queued, st.Applied, st.Fence, *dataDir, *out, storage.FormatChecksum(sum), storage.RaftMetaName)
	return err
}

// loadDataDir reads the lock table of a stopped node's data directory.
func loadDataDir(dataDir string) (*statemachine.Table, error) {
	dir := filepath.Join(dataDir, dataDirLocks)
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("no lock store in %s: %w", dataDir, err)
	}
	db, err := storage.Open(storage.Config{Dir: dir})
	if err != nil {
		return nil, fmt.Errorf("open %s (stop the node first: its store is locked while it runs): %w", dir, err)
	}
	t, err := statemachine.LoadStore(db)
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("close storage: %w", cerr)
	}
	if err != nil {
		return nil, err
	}
	return t, nil
}

func snapshotRestore(args []string, stdout, stderr io.Writer) error {
	fs := newSnapshotFlags("restore", stderr)
	in := fs.String("in", "", "snapshot directory or file written by export (or by a node)")
	dataDir := fs.String("data-dir", "", "empty data directory to restore into")
	pos, err := parseMixed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return nil
	}
	if err != nil {
		return err
	}
	if len(pos) > 0 || *in == "" || *dataDir == "" {
		return errors.New("snapshot restore: want --in <snapshot> --data-dir <empty dir>")
	}
	var t *statemachine.Table
	var version int
	check, err := storage.ReadSnapshotPath(*in, snapshotMaxArchive, snapshotMaxContent, func(r io.Reader, _ storage.ArchiveCheck) error {
		br := newPeekReader(r)
		if !br.hasPrefix("nacos-lockd-locks\n") {
			return errors.New("not a nacos-lockd snapshot (for a Nacos snapshot, use import-nacos)")
		}
		var err error
		t, version, err = statemachine.ReadSnapshot(br)
		return err
	})
	if err != nil {
		return fmt.Errorf("snapshot restore %s: %w", *in, err)
	}
	abs, err := filepath.Abs(*in)
	if err != nil {
		abs = *in
	}
	marker := restoreMarker{Source: abs, Checksum: check.Computed, Version: version, RestoredAtMs: time.Now().UnixMilli(), Locks: t.Stats().Locks}
	if err := installDataDir(*dataDir, t, restoreMarkerName, marker); err != nil {
		return fmt.Errorf("snapshot restore: %w", err)
	}
	st := t.Stats()
	fmt.Fprintf(stdout, "restored %d locks (%d waiters) from %s (format version %d) into %s\n", st.Locks, st.Queued, *in, version, *dataDir)
	writeCheck(stdout, check)
	_, err = fmt.Fprintf(stdout, "the node starts a new Raft log there; fencing tokens continue above %d\n", st.TokenBase)
	return err
}

// restoreMarker is the content of restoreMarkerName.
type restoreMarker struct {
	Source       string `json:"source"`
	Checksum     string `json:"checksum"`
	Version      int    `json:"format_version"`
	RestoredAtMs int64  `json:"restored_at_ms"`
	Locks        int    `json:"locks"`
}

// peekReader lets restore look at the content's first bytes without
// reading it all into memory twice.
type peekReader struct {
	head []byte
	r    io.Reader
}

func newPeekReader(r io.Reader) *peekReader {
	head := make([]byte, 64)
	n, _ := io.ReadFull(r, head)
	return &peekReader{head: head[:n], r: r}
}

func (p *peekReader) hasPrefix(s string) bool { return bytes.HasPrefix(p.head, []byte(s)) }

func (p *peekReader) Read(b []byte) (int, error) {
	if len(p.head) > 0 {
		n := copy(b, p.head)
		p.head = p.head[n:]
		return n, nil
	}
	return p.r.Read(b)
}
