// Package durable writes files and directory entries so that they survive
// a crash: the file's bytes synced, and the directory synced after an
// entry in it was created, renamed or removed.
package durable

import (
	"fmt"
	"os"
)

// CreateFile creates path (it must not exist) with b, synced to disk. The
// directory entry is not synced: call SyncDir when it must survive too.
func CreateFile(path string, b []byte) error {
	return writeSynced(path, b, os.O_EXCL)
}

// WriteFile writes b to path, synced to disk, creating the file or
// replacing what it held: for a marker that a step interrupted before may
// have left behind. The directory entry is not synced, as for CreateFile.
func WriteFile(path string, b []byte) error {
	return writeSynced(path, b, os.O_TRUNC)
}

// writeSynced opens path for writing with os.O_CREATE and mode, writes b
// and syncs it.
func writeSynced(path string, b []byte, mode int) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|mode, 0o640)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// SyncDir syncs dir, so that the entries created, renamed or removed in it
// survive a crash.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open dir for sync: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("sync dir: %w", err)
	}
	return nil
}
