package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"nacos-lockd/internal/durable"
)

// Data directory layout.
const (
	LocksDir = "locks" // badger: the lock table
	RaftDir  = "raft"  // dragonboat's NodeHost directory
	// ImportMarker records, in the data directory, which Nacos snapshot an
	// import installed, so a restart with --import-nacos still set is
	// recognised and not refused.
	ImportMarker = "nacos-import.json"
	// RestoreMarker records which snapshot `snapshot restore` installed.
	RestoreMarker = "snapshot-restore.json"
	// SealedMarker is written once the installed table is sealed into a
	// Raft snapshot (see SealPending).
	SealedMarker = "installed-state-sealed"
)

// SealPending reports whether dataDir holds a table installed by an import
// or a restore that no node has sealed into a Raft snapshot yet. The
// server checks it before starting the node and, when true, calls
// Node.SealInstalledState after WaitReady and then MarkSealed: until then,
// a replica joining the shard would replay a log that lacks the table.
func SealPending(dataDir string) bool {
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(dataDir, name))
		return err == nil
	}
	return (exists(ImportMarker) || exists(RestoreMarker)) && !exists(SealedMarker)
}

// MarkSealed records that the installed table was sealed (SealPending).
func MarkSealed(dataDir string) error {
	ts := time.Now().UTC().Format(time.RFC3339Nano) + "\n"
	if err := durable.CreateFile(filepath.Join(dataDir, SealedMarker), []byte(ts)); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("record sealed install: %w", err)
	}
	return nil
}
