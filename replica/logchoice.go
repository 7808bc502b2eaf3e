package replica

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/lni/dragonboat/v4/config"

	"nacos-lockd/internal/durable"
	"nacos-lockd/replica/raftlog"
	"nacos-lockd/replica/walfile"
	"nacos-lockd/settings"
)

// The Raft logs a replica can keep (RaftConfig.RaftLog): settings.RaftLog's
// choices, named for the code that tells them apart.
const (
	// LogLockd is package raftlog: one direct synced write per Raft
	// update, no database under it.
	LogLockd = "lockd"
	// LogPebble is dragonboat's own log in pebble, which every data dir
	// made before December 2026 holds.
	LogPebble = "pebble"
)

// raftLogMarker, in the node host directory, names the log the data dir
// was made with. dragonboat refuses to open a data dir with another log
// than the one that wrote it, so the choice is made once, when the dir is
// new, and kept.
const raftLogMarker = "nacos-lockd-raft-log"

// dragonboatFlagFile is dragonboat's record of a data dir it has opened.
const dragonboatFlagFile = "dragonboat.ds"

// chooseLog returns the log the data dir keeps: the one its marker names;
// dragonboat's pebble log for a dir dragonboat opened before the marker
// existed; for a new dir, want (settings.RaftLog's default when empty),
// recorded first.
func chooseLog(nodeHostDir, want string) (string, error) {
	if want == "" {
		want = settings.RaftLog.DefaultString()
	}
	if !settings.RaftLog.CheckChoice(want) {
		return "", fmt.Errorf("raft log %q: want %s", want, settings.RaftLog.ChoiceList())
	}
	marker := filepath.Join(nodeHostDir, raftLogMarker)
	b, err := os.ReadFile(marker)
	switch {
	case err == nil:
		got := strings.TrimSpace(string(b))
		if !settings.RaftLog.CheckChoice(got) {
			return "", fmt.Errorf("%s names the raft log %q, which this build does not know", marker, got)
		}
		return got, nil
	case !errors.Is(err, os.ErrNotExist):
		return "", fmt.Errorf("read raft log marker: %w", err)
	}
	if _, err := os.Stat(filepath.Join(nodeHostDir, dragonboatFlagFile)); err == nil {
		return LogPebble, nil // made before there was a choice
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("inspect raft dir: %w", err)
	}
	if err := writeSynced(nodeHostDir, raftLogMarker, want+"\n"); err != nil {
		return "", fmt.Errorf("record raft log: %w", err)
	}
	return want, nil
}

// writeSynced writes name in dir durably, the directory entry included.
// It writes a temporary file and renames it, so that a crash leaves the
// whole content or no file.
func writeSynced(dir, name, content string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp := filepath.Join(dir, name+".tmp")
	if err := os.Remove(tmp); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := durable.CreateFile(tmp, []byte(content)); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		return err
	}
	return durable.SyncDir(dir)
}

// logFactory returns dragonboat's log settings for the log chosen; our
// own log counts its synced writes in syncs.
func logFactory(log string, syncs *atomic.Uint64) config.ExpertConfig {
	if log == LogPebble {
		walfile.Install(logBusy) // before dragonboat opens its log: see the package
		return config.ExpertConfig{LogDB: LogDBConfig()}
	}
	return config.ExpertConfig{
		LogDB:        LogDBConfig(),
		LogDBFactory: raftlog.Factory{Options: raftlog.Options{Busy: logBusy, Syncs: syncs}},
	}
}
