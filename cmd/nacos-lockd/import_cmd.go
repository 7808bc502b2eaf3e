package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/compat"
	"nacos-lockd/internal/durable"
	"nacos-lockd/server"
	"nacos-lockd/statemachine"
	"nacos-lockd/storage"
)

// Data directory layout: package server owns it (server/datadir.go).
const (
	dataDirLocks      = server.LocksDir
	dataDirRaft       = server.RaftDir
	importMarkerName  = server.ImportMarker
	restoreMarkerName = server.RestoreMarker
)

// importNowMs is the import time; tests replace it to match fixtures.
var importNowMs = func() int64 { return time.Now().UnixMilli() }

// importMarker is the content of importMarkerName.
type importMarker struct {
	Source       string `json:"source"`
	Checksum     string `json:"checksum"` // CRC-64 of the archive, as Nacos writes it
	ImportedAtMs int64  `json:"imported_at_ms"`
	Locks        int    `json:"locks"`
	TokenBase    uint64 `json:"token_base"`
}

// runImportNacos is `nacos-lockd import-nacos --snapshot <dir or
// nacos_lock.zip> --data-dir <dir>`: it reads a Nacos lock snapshot,
// verifies its checksum, converts its locks (docs/lock-semantics.md §9.6) and
// installs them as the whole lock table of an empty data directory, then
// prints what it imported. Nothing is written unless the whole snapshot
// was read and converted.
func runImportNacos(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nacos-lockd import-nacos", flag.ContinueOnError)
	fs.SetOutput(stderr)
	snapshot := fs.String("snapshot", "", "Nacos lock snapshot: its directory (snapshot_N, with __raft_snapshot_meta) or its nacos_lock.zip")
	dataDir := fs.String("data-dir", "./data", "empty data directory to create the lock table in")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: nacos-lockd import-nacos --snapshot <dir or nacos_lock.zip> --data-dir <empty dir>")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("import-nacos: unexpected arguments %v", fs.Args())
	}
	if *snapshot == "" {
		return errors.New("import-nacos: --snapshot is required")
	}
	rep, err := importNacos(*snapshot, *dataDir)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "imported %s into %s\n", *snapshot, *dataDir)
	if err := rep.Write(stdout); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "start the node with --data-dir %s; clients must reconnect to it\n", *dataDir)
	return err
}

// importAtStart serves the start flag --import-nacos <path>. It imports
// only into an empty data directory. A data directory that an earlier
// import of the same snapshot (same archive checksum) created is accepted
// as it is, so the flag may stay set across restarts; any other non-empty
// data directory is refused, never merged into or overwritten.
//
// The server runs it (server.Config.Install) before opening storage.
func importAtStart(path, dataDir string, log zerolog.Logger) error {
	empty, err := dataDirEmpty(dataDir)
	if err != nil {
		return err
	}
	if !empty {
		marker, err := readImportMarker(dataDir)
		if err != nil {
			return fmt.Errorf("--import-nacos %s: data dir %s is not empty, and no import made it (%v); start without --import-nacos, or with an empty --data-dir", path, dataDir, err)
		}
		check, err := storage.ReadSnapshotPath(path, compat.MaxNacosArchiveBytes, compat.MaxNacosContentBytes,
			func(io.Reader, storage.ArchiveCheck) error { return nil })
		if err != nil {
			return fmt.Errorf("--import-nacos %s: %w", path, err)
		}
		if check.Computed != marker.Checksum {
			return fmt.Errorf("--import-nacos %s: data dir %s was imported from another snapshot (checksum %s, this one %s); refusing to replace it", path, dataDir, marker.Checksum, check.Computed)
		}
		log.Info().Str("snapshot", path).Str("checksum", marker.Checksum).
			Msg("nacos snapshot already imported into this data dir; --import-nacos has nothing to do")
		return nil
	}
	rep, err := importNacos(path, dataDir)
	if err != nil {
		return fmt.Errorf("--import-nacos: %w", err)
	}
	log.Info().Str("snapshot", path).Str("checksum", rep.Check.Computed).Bool("checksum_verified", rep.Check.Verified()).
		Str("generation", rep.Generation).Int("entries", rep.Entries).Int("locks", rep.Table.Locks).
		Int("held", rep.Table.Held).Int("handed_off", rep.Table.HandedOff).Int("legacy_migrated", rep.LegacyMigrated).
		Int("expired_dropped", rep.ExpiredDropped).Int("free_dropped", rep.FreeDropped).
		Int("waiters", rep.Table.Waiters).Int("waiters_dropped", rep.Table.WaitersDropped).
		Uint64("token_base", rep.Table.TokenBase).Msg("nacos snapshot imported")
	return nil
}

// importNacos reads and converts the snapshot, then installs it into the
// empty data dir with its import marker.
func importNacos(path, dataDir string) (compat.NacosReport, error) {
	now := importNowMs()
	t, rep, err := compat.ImportNacosSnapshot(path, compat.NacosImportOptions{NowMs: now})
	if err != nil {
		return rep, fmt.Errorf("import %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	marker := &importMarker{Source: abs, Checksum: rep.Check.Computed, ImportedAtMs: now, Locks: rep.Table.Locks, TokenBase: rep.Table.TokenBase}
	if err := installDataDir(dataDir, t, importMarkerName, marker); err != nil {
		return rep, err
	}
	return rep, nil
}

// dataDirEmpty reports whether dir is absent or an empty directory.
func dataDirEmpty(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read data dir: %w", err)
	}
	return len(entries) == 0, nil
}

// installDataDir writes t as the whole lock table of an empty data dir
// (statemachine.InstallFresh), and marker (JSON) beside it as markerName.
// A data dir that is not empty is refused untouched; on failure, whatever
// this call created is removed again.
func installDataDir(dataDir string, t *statemachine.Table, markerName string, marker any) (err error) {
	empty, err := dataDirEmpty(dataDir)
	if err != nil {
		return err
	}
	if !empty {
		return fmt.Errorf("data dir %s is not empty: install into a new or empty directory", dataDir)
	}
	_, statErr := os.Stat(dataDir)
	created := errors.Is(statErr, os.ErrNotExist)
	if err := os.MkdirAll(dataDir, 0o750); err != nil {
		return fmt.Errorf("create data dir: %w", err)
	}
	defer func() {
		if err == nil {
			return
		}
		if created {
			os.RemoveAll(dataDir)
			return
		}
		os.RemoveAll(filepath.Join(dataDir, dataDirLocks))
		os.Remove(filepath.Join(dataDir, markerName))
	}()
	db, err := storage.Open(storage.Config{Dir: filepath.Join(dataDir, dataDirLocks)})
	if err != nil {
		return fmt.Errorf("open storage: %w", err)
	}
	if err := statemachine.InstallFresh(db, t); err != nil {
		db.Close()
		return err
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("close storage: %w", err)
	}
	b, err := json.MarshalIndent(marker, "", "  ")
	if err != nil {
		return err
	}
	return durable.CreateFile(filepath.Join(dataDir, markerName), append(b, '\n'))
}

func readImportMarker(dataDir string) (importMarker, error) {
	var m importMarker
	b, err := os.ReadFile(filepath.Join(dataDir, importMarkerName))
	if err != nil {
		return m, err
	}
	if err := json.Unmarshal(b, &m); err != nil || m.Checksum == "" {
		return m, fmt.Errorf("%s is not an import record", importMarkerName)
	}
	return m, nil
}
