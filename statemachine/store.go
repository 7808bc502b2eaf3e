package statemachine

import (
	"errors"
	"fmt"
	"io"
	"slices"

	sm "github.com/lni/dragonboat/v4/statemachine"

	"nacos-lockd/storage"
)

// kvReader is what loading a table needs from storage: a DB or a View.
type kvReader interface {
	Get(key []byte) ([]byte, error)
	Scan(prefix []byte, fn func(key, val []byte) error) error
}

// readStoredMeta reads the table metadata; absent keys are zero (an empty
// store, or one written before the key existed).
func readStoredMeta(r kvReader) (snapshotMeta, error) {
	var m snapshotMeta
	var clock uint64
	for _, f := range []struct {
		key []byte
		dst *uint64
	}{
		{keyApplied, &m.applied},
		{keyClock, &clock},
		{keyFence, &m.fence},
		{keyTokenBase, &m.tokenBase},
	} {
		b, err := r.Get(f.key)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return m, fmt.Errorf("read %s: %w", f.key, err)
		}
		if *f.dst, err = decodeUint(b); err != nil {
			return m, fmt.Errorf("read %s: %w", f.key, err)
		}
	}
	m.clock = int64(clock)
	if m.tokenBase > maxTokenBase {
		return m, fmt.Errorf("read %s: %w: %d out of range", keyTokenBase, errMalformed, m.tokenBase)
	}
	return m, nil
}

// LoadStore reads the whole lock table from a store: what a node loads
// when it opens, and what `snapshot export` reads from a stopped node's
// data directory.
func LoadStore(db *storage.DB) (*Table, error) { return loadStoreFrom(db) }

func loadStoreFrom(r kvReader) (*Table, error) {
	m, err := readStoredMeta(r)
	if err != nil {
		return nil, err
	}
	t := NewTable()
	t.applied, t.clock, t.fence, t.tokenBase = m.applied, m.clock, m.fence, m.tokenBase
	var locks []storedLock
	ns := names{}
	err = r.Scan([]byte{lockPrefix}, func(key, val []byte) error {
		id, err := parseLockKey(key)
		if err != nil {
			return err
		}
		l, err := decodeRecord(val, ns)
		if err != nil {
			return fmt.Errorf("lock record %q: %w", key, err)
		}
		locks = append(locks, storedLock{id, l})
		return nil
	})
	if err != nil {
		return nil, err
	}
	t.putAll(locks)
	return t, nil
}

// storedPairs yields everything a store holds for t, metadata after the
// locks and the applied index last (see storage.Batch.Commit).
func (t *Table) storedPairs(put func(key, val []byte) error) error {
	if err := t.eachRecord(put); err != nil {
		return err
	}
	for _, kv := range []struct {
		k []byte
		v uint64
	}{{keyClock, uint64(t.clock)}, {keyFence, t.fence}, {keyTokenBase, t.tokenBase}, {keyApplied, t.applied}} {
		if err := put(kv.k, encodeUint(kv.v)); err != nil {
			return err
		}
	}
	return nil
}

// saveSnapshotStream writes a storage view as the Raft snapshot stream:
// a nacos_lock.zip archive of the current format followed by its checksum
// record (storage.WriteSnapshotStream). It is diskSM.SaveSnapshot's body.
//
// Stored records are re-encoded in the current record version: a lock
// untouched since an upgrade is still stored in an older one, and the
// snapshot must hold the format's record version only, the same bytes for
// the same state.
func saveSnapshotStream(view *storage.View, w io.Writer, done <-chan struct{}) error {
	meta, err := readStoredMeta(view)
	if err != nil {
		return err
	}
	return storage.WriteSnapshotStream(w, func(ew io.Writer) error {
		return writeSnapshot(ew, meta, func(emit func(key, rec []byte) error) error {
			return view.Scan([]byte{lockPrefix}, func(key, val []byte) error {
				select {
				case <-done:
					return sm.ErrSnapshotStopped
				default:
				}
				l, err := decodeRecord(val, nil) // re-encoded at once: nothing to share
				if err != nil {
					return fmt.Errorf("lock record %q: %w", key, err)
				}
				return emit(key, encodeRecord(l))
			})
		})
	})
}

// readSnapshotStream parses a Raft snapshot stream into a new table,
// verifying the archive's checksum. A stream without a checksum record is
// accepted only if its content is format 1, which predates the record:
// every later writer adds it, so its absence means the stream was cut.
func readSnapshotStream(r io.Reader) (*Table, error) {
	var t *Table
	err := storage.ReadSnapshotStream(r, maxArchiveBytes, maxEntryBytes, func(er io.Reader, check storage.ArchiveCheck) error {
		var version uint64
		var err error
		t, version, err = readSnapshotVersion(er)
		if err != nil {
			return err
		}
		if !check.Verified() && version >= 2 {
			return fmt.Errorf("%w: snapshot format %d without its checksum record (stream cut short?)", errMalformed, version)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	return t, nil
}

// replaceStore makes db hold exactly t (never a merge): diskSM's
// RecoverFromSnapshot body after readSnapshotStream.
func replaceStore(db *storage.DB, t *Table) error {
	if err := db.Replace(t.storedPairs); err != nil {
		return fmt.Errorf("install snapshot: %w", err)
	}
	return nil
}

// ErrStoreNotEmpty is returned by InstallFresh for a store that holds
// anything.
var ErrStoreNotEmpty = errors.New("lock store is not empty")

// InstallFresh writes t into an empty store as the starting state of a
// node whose Raft log is new and empty (an import, a restore). Such a log
// numbers its entries from 1 again, so t is rebased in place first: its
// applied index becomes 0 (dragonboat skips entries up to the index the
// state machine reports, so a higher one would swallow new commands), and
// its token base rises to its fence, so every grant on the new log gets a
// token above every token t ever handed out.
func InstallFresh(db *storage.DB, t *Table) error {
	empty := true
	err := db.Scan(nil, func(_, _ []byte) error {
		empty = false
		return errStop
	})
	if err != nil && !errors.Is(err, errStop) {
		return fmt.Errorf("check store: %w", err)
	}
	if !empty {
		return ErrStoreNotEmpty
	}
	t.applied = 0
	t.tokenBase = max(t.tokenBase, t.fence)
	if err := db.Replace(t.storedPairs); err != nil {
		return fmt.Errorf("install lock table: %w", err)
	}
	return nil
}

var errStop = errors.New("stop")

// WriteSnapshot writes t as snapshot content (the "lock" entry of a
// nacos_lock.zip archive) in the current format.
func (t *Table) WriteSnapshot(w io.Writer) error {
	return writeSnapshot(w, snapshotMeta{applied: t.applied, clock: t.clock, fence: t.fence, tokenBase: t.tokenBase}, t.eachRecord)
}

// ReadSnapshot parses snapshot content of any format version this build
// knows into a new table (older formats are migrated), and reports the
// version it read.
func ReadSnapshot(r io.Reader) (*Table, int, error) {
	t, v, err := readSnapshotVersion(r)
	if err != nil {
		return nil, int(min(v, 1<<20)), err
	}
	return t, int(v), nil
}

// Locks lists every lock in the table in (kind, key) order.
func (t *Table) Locks() []LockInfo {
	ids := make([]lockID, 0, len(t.locks))
	for id := range t.locks {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, compareIDs)
	out := make([]LockInfo, len(ids))
	for i, id := range ids {
		out[i] = t.Lock(id.kind, id.key)
	}
	return out
}
