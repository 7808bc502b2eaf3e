package statemachine

import (
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/rs/zerolog"

	"nacos-lockd/storage"
)

// Archive limits for snapshots received from other replicas: far above any
// real lock table, low enough that a corrupt stream cannot exhaust memory.
const (
	maxArchiveBytes = 4 << 30
	maxEntryBytes   = 16 << 30
)

// Notifier receives the grants to queued waiters made by each applied
// batch, after the batch is durable. It runs on the apply goroutine, so it
// must not block: hand the work off and return.
type Notifier func([]Notification)

// diskSM adapts Table to dragonboat's on-disk state machine. The table is
// kept in memory for speed and written through to badger at the end of
// every Update batch, together with the last applied index, so a restart
// loads the table and replays only the log tail.
type diskSM struct {
	db     *storage.DB
	notify Notifier
	log    zerolog.Logger
	m      *nodeMetrics

	mu    sync.RWMutex // Update and RecoverFromSnapshot write; Lookup reads
	table *Table
}

var _ sm.IOnDiskStateMachine = (*diskSM)(nil)

func newDiskSM(db *storage.DB, notify Notifier, log zerolog.Logger) *diskSM {
	return &diskSM{db: db, notify: notify, log: log, table: NewTable()}
}

// Open loads the persisted table and reports the last applied index.
func (s *diskSM) Open(<-chan struct{}) (uint64, error) {
	t, err := loadTable(s.db)
	if err != nil {
		return 0, fmt.Errorf("load lock table: %w", err)
	}
	s.mu.Lock()
	s.table = t
	s.mu.Unlock()
	s.log.Info().Uint64("applied", t.applied).Int("locks", len(t.locks)).Uint64("fence", t.fence).Msg("lock table loaded")
	return t.applied, nil
}

// Update applies a batch and persists every lock it changed plus the
// applied index and clock in one storage batch.
func (s *diskSM) Update(entries []sm.Entry) ([]sm.Entry, error) {
	if len(entries) == 0 {
		return entries, nil
	}
	s.mu.Lock()
	t := s.table
	for i := range entries {
		res := t.ApplyEncoded(entries[i].Index, entries[i].Cmd)
		entries[i].Result = sm.Result{Value: uint64(res.Code), Data: encodeResult(res)}
	}
	err := persist(s.db, t, t.takeDirty())
	notes := t.takeNotifications()
	s.mu.Unlock()
	if err != nil {
		// The in-memory table is now ahead of the disk: halting the replica
		// is the only safe answer, and dragonboat does that on error.
		return nil, fmt.Errorf("persist applied entries: %w", err)
	}
	if len(notes) > 0 && s.notify != nil {
		s.notify(notes)
	}
	return entries, nil
}

func persist(db *storage.DB, t *Table, dirty []lockID) error {
	b := db.NewBatch()
	defer b.Discard()
	for _, id := range dirty {
		if l, ok := t.locks[id]; ok {
			b.Set(lockKey(id), encodeRecord(l))
		} else {
			b.Delete(lockKey(id))
		}
	}
	b.Set(keyClock, encodeUint(uint64(t.clock)))
	b.Set(keyFence, encodeUint(t.fence))
	b.Set(keyApplied, encodeUint(t.applied)) // last: see storage.Batch.Commit
	return b.Commit()
}

func loadTable(db *storage.DB) (*Table, error) {
	t := NewTable()
	for _, m := range []struct {
		key []byte
		dst func(uint64)
	}{
		{keyApplied, func(v uint64) { t.applied = v }},
		{keyClock, func(v uint64) { t.clock = int64(v) }},
		{keyFence, func(v uint64) { t.fence = v }},
	} {
		b, err := db.Get(m.key)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", m.key, err)
		}
		v, err := decodeUint(b)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", m.key, err)
		}
		m.dst(v)
	}
	err := db.Scan([]byte{lockPrefix}, func(key, val []byte) error {
		id, err := parseLockKey(key)
		if err != nil {
			return err
		}
		l, err := decodeRecord(val)
		if err != nil {
			return fmt.Errorf("lock record %q: %w", key, err)
		}
		t.put(id, l)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return t, nil
}

// Lookup answers read-only queries (see query.go).
func (s *diskSM) Lookup(q interface{}) (interface{}, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.table.lookup(q)
}

// Sync makes every applied batch durable.
func (s *diskSM) Sync() error { return s.db.Sync() }

// PrepareSnapshot captures a point-in-time view. Update is excluded while
// it runs and every Update has committed its batch, so the view holds
// exactly the state at the last applied index.
func (s *diskSM) PrepareSnapshot() (interface{}, error) {
	return s.db.View(), nil
}

// SaveSnapshot writes the view as a nacos_lock.zip archive.
func (s *diskSM) SaveSnapshot(ctx interface{}, w io.Writer, done <-chan struct{}) error {
	view, ok := ctx.(*storage.View)
	if !ok {
		return fmt.Errorf("save snapshot: unexpected context %T", ctx)
	}
	defer view.Close()
	start := time.Now()
	cw := &countingWriter{w: w}
	if err := writeArchive(view, cw, done); err != nil {
		return err
	}
	s.m.snapshot(cw.n, time.Since(start))
	s.log.Info().Int64("bytes", cw.n).Dur("took", time.Since(start)).Msg("snapshot written")
	return nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

func writeArchive(view *storage.View, w io.Writer, done <-chan struct{}) error {
	meta, err := readMeta(view)
	if err != nil {
		return err
	}
	return storage.WriteArchive(w, func(ew io.Writer) error {
		return writeSnapshot(ew, meta, func(emit func(key, rec []byte) error) error {
			return view.Scan([]byte{lockPrefix}, func(key, val []byte) error {
				select {
				case <-done:
					return sm.ErrSnapshotStopped
				default:
				}
				return emit(key, val)
			})
		})
	})
}

func readMeta(view *storage.View) (snapshotMeta, error) {
	var m snapshotMeta
	for _, f := range []struct {
		key []byte
		dst func(uint64)
	}{
		{keyApplied, func(v uint64) { m.applied = v }},
		{keyClock, func(v uint64) { m.clock = int64(v) }},
		{keyFence, func(v uint64) { m.fence = v }},
	} {
		b, err := view.Get(f.key)
		if errors.Is(err, storage.ErrNotFound) {
			continue
		}
		if err != nil {
			return m, fmt.Errorf("read %s: %w", f.key, err)
		}
		v, err := decodeUint(b)
		if err != nil {
			return m, fmt.Errorf("read %s: %w", f.key, err)
		}
		f.dst(v)
	}
	return m, nil
}

// RecoverFromSnapshot replaces the whole table with the snapshot's: a
// follower never keeps locks the leader no longer has.
func (s *diskSM) RecoverFromSnapshot(r io.Reader, done <-chan struct{}) error {
	var t *Table
	err := storage.ReadArchive(r, maxArchiveBytes, maxEntryBytes, func(er io.Reader) error {
		var err error
		t, err = readSnapshot(er)
		return err
	})
	if err != nil {
		return fmt.Errorf("read snapshot: %w", err)
	}
	select {
	case <-done:
		return sm.ErrSnapshotStopped
	default:
	}
	err = s.db.Replace(func(put func(key, val []byte) error) error {
		if err := t.eachRecord(put); err != nil {
			return err
		}
		for _, kv := range []struct {
			k []byte
			v uint64
		}{{keyClock, uint64(t.clock)}, {keyFence, t.fence}, {keyApplied, t.applied}} {
			if err := put(kv.k, encodeUint(kv.v)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("install snapshot: %w", err)
	}
	s.mu.Lock()
	s.table = t
	s.mu.Unlock()
	s.log.Info().Uint64("applied", t.applied).Int("locks", len(t.locks)).Msg("lock table recovered from snapshot")
	return nil
}

// Close releases nothing: the storage belongs to the caller, who closes it
// after the NodeHost.
func (s *diskSM) Close() error { return nil }
