package statemachine

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	"nacos-lockd/statemachine/lockview"
)

// StoreReader is what loading a table needs from its key/value store
// (storage.DB and storage.View are ones).
type StoreReader interface {
	Scan(prefix []byte, fn func(key, val []byte) error) error
}

// Store is a key/value store a whole table can be installed in
// (storage.DB is one).
type Store interface {
	StoreReader
	// Replace makes the store hold exactly the pairs given, atomically.
	Replace(pairs func(put func(key, val []byte) error) error) error
}

// readStoredMeta reads the table metadata; absent keys are zero (an empty
// store, or one written before the key existed).
func readStoredMeta(r StoreReader) (snapshotMeta, error) {
	var m snapshotMeta
	var clock, level uint64
	fields := []struct {
		key []byte
		dst *uint64
	}{
		{keyApplied, &m.applied},
		{keyClock, &clock},
		{keyFence, &m.fence},
		{keyTokenBase, &m.tokenBase},
		{keyLevel, &level},
	}
	err := r.Scan([]byte{metaPrefix}, func(key, val []byte) error {
		for _, f := range fields {
			if !bytes.Equal(key, f.key) {
				continue
			}
			v, err := decodeUint(val)
			if err != nil {
				return fmt.Errorf("read %s: %w", f.key, err)
			}
			*f.dst = v
		}
		return nil
	})
	if err != nil {
		return m, err
	}
	m.clock = int64(clock)
	m.level = LevelBaseline
	if level != 0 {
		if level > 1<<20 {
			return m, fmt.Errorf("read %s: %w: %d out of range", keyLevel, errMalformed, level)
		}
		m.level = int(level)
	}
	if m.tokenBase > maxTokenBase {
		return m, fmt.Errorf("read %s: %w: %d out of range", keyTokenBase, errMalformed, m.tokenBase)
	}
	return m, nil
}

// LoadStore reads the whole lock table from a store: what a node loads
// when it opens, and what `snapshot export` reads from a stopped node's
// data directory.
func LoadStore(r StoreReader) (*Table, error) { return loadStoreFrom(r) }

func loadStoreFrom(r StoreReader) (*Table, error) {
	m, err := readStoredMeta(r)
	if err != nil {
		return nil, err
	}
	if err := checkLevel(uint64(m.level)); err != nil {
		return nil, err
	}
	t := NewTable()
	t.applied, t.clock, t.fence, t.tokenBase, t.level = m.applied, m.clock, m.fence, m.tokenBase, m.level
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

// StoredPairs yields everything a store holds for t, metadata after the
// locks and the applied index last (see storage.Batch.Commit): what
// Store.Replace installs.
func (t *Table) StoredPairs(put func(key, val []byte) error) error {
	if err := t.eachRecord(put); err != nil {
		return err
	}
	for _, kv := range []struct {
		k []byte
		v uint64
	}{{keyClock, uint64(t.clock)}, {keyFence, t.fence}, {keyTokenBase, t.tokenBase}, {keyLevel, uint64(t.level)}, {keyApplied, t.applied}} {
		if bytes.Equal(kv.k, keyLevel) && kv.v == LevelBaseline {
			continue // absent is the baseline (see keyLevel)
		}
		if err := put(kv.k, encodeUint(kv.v)); err != nil {
			return err
		}
	}
	return nil
}

// WriteStoredSnapshot writes what a store holds as snapshot content in the
// current format (the "lock" entry of a nacos_lock.zip archive). check runs
// before each lock and stops the write with its error.
//
// Stored records are re-encoded in the current record version: a lock
// untouched since an upgrade is still stored in an older one, and the
// snapshot must hold the format's record version only, the same bytes for
// the same state.
func WriteStoredSnapshot(w io.Writer, r StoreReader, check func() error) error {
	meta, err := readStoredMeta(r)
	if err != nil {
		return err
	}
	return writeSnapshot(w, meta, func(emit func(key, rec []byte) error) error {
		return r.Scan([]byte{lockPrefix}, func(key, val []byte) error {
			if err := check(); err != nil {
				return err
			}
			l, err := decodeRecord(val, nil) // re-encoded at once: nothing to share
			if err != nil {
				return fmt.Errorf("lock record %q: %w", key, err)
			}
			return emit(key, encodeRecord(l))
		})
	})
}

// ReadSnapshotContent parses the snapshot content of a Raft snapshot
// stream into a new table. verified says whether the stream's checksum
// record was there and matched: content of format 2 or later without it is
// refused, since every writer of those adds it, so its absence means the
// stream was cut.
func ReadSnapshotContent(r io.Reader, verified bool) (*Table, error) {
	t, version, err := readSnapshotVersion(r)
	if err != nil {
		return nil, err
	}
	if !verified && version >= 2 {
		return nil, fmt.Errorf("%w: snapshot format %d without its checksum record (stream cut short?)", errMalformed, version)
	}
	return t, nil
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
func InstallFresh(db Store, t *Table) error {
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
	if err := db.Replace(t.StoredPairs); err != nil {
		return fmt.Errorf("install lock table: %w", err)
	}
	return nil
}

var errStop = errors.New("stop")

// WriteSnapshot writes t as snapshot content (the "lock" entry of a
// nacos_lock.zip archive) in the current format.
func (t *Table) WriteSnapshot(w io.Writer) error {
	return writeSnapshot(w, snapshotMeta{applied: t.applied, clock: t.clock, fence: t.fence, tokenBase: t.tokenBase, level: t.level}, t.eachRecord)
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
func (t *Table) Locks() []lockview.Lock {
	out := make([]lockview.Lock, 0, t.locks.Len())
	t.locks.Ascend(func(l *lockState) bool {
		out = append(out, t.view(l))
		return true
	})
	return out
}
