package replica

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/rs/zerolog"

	"nacos-lockd/storage"

	"nacos-lockd/statemachine"
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
type Notifier func([]statemachine.Notification)

// diskSM adapts Table to dragonboat's on-disk state machine. The table is
// kept in memory and written to badger, together with the last applied
// index, when dragonboat asks for durability (Sync, before every
// snapshot and log compaction), before a snapshot is captured, at Close,
// and whenever persistEvery locks are waiting. Between those points the
// Raft log holds the applied entries, so a restart loads the table and
// replays the log from the persisted index. A lock acquired and released
// between two persists never touches badger.
type diskSM struct {
	db     *storage.DB
	notify Notifier
	log    zerolog.Logger
	m      *nodeMetrics

	mu    sync.RWMutex // Update and RecoverFromSnapshot write; Lookup reads
	table *statemachine.Table
	// level mirrors the table's cluster level for the proposers
	// (Node.ClusterLevel), who must not wait for mu; nil in tests that
	// build a diskSM alone.
	level *atomic.Int64
}

// persistEvery bounds the locks waiting to be written (and so the size of
// one storage batch) between the points where dragonboat asks for
// durability.
const persistEvery = 4096

var _ sm.IOnDiskStateMachine = (*diskSM)(nil)

func newDiskSM(db *storage.DB, notify Notifier, log zerolog.Logger) *diskSM {
	return &diskSM{db: db, notify: notify, log: log, table: statemachine.NewTable()}
}

// Open loads the persisted table and reports the last applied index.
func (s *diskSM) Open(<-chan struct{}) (uint64, error) {
	t, err := statemachine.LoadStore(s.db)
	if err != nil {
		return 0, fmt.Errorf("load lock table: %w", err)
	}
	s.mu.Lock()
	s.table = t
	s.mu.Unlock()
	s.setLevel(t.Level())
	st := t.Stats()
	s.log.Info().Uint64("applied", st.Applied).Int("locks", st.Locks).Uint64("fence", st.Fence).Int("cluster_level", st.Level).Msg("lock table loaded")
	return st.Applied, nil
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
		if statemachine.IsLevelEntry(entries[i].Cmd) {
			if err := s.applyLevel(t, &entries[i]); err != nil {
				s.mu.Unlock()
				return nil, err
			}
			continue
		}
		if statemachine.IsBatch(entries[i].Cmd) {
			rs := t.ApplyBatch(entries[i].Index, entries[i].Cmd)
			entries[i].Result = sm.Result{Value: uint64(len(rs)), Data: statemachine.EncodeResults(rs)}
			continue
		}
		res := t.ApplyEncoded(entries[i].Index, entries[i].Cmd)
		entries[i].Result = sm.Result{Value: uint64(res.Code), Data: statemachine.EncodeResult(res)}
	}
	var err error
	if t.Changed() >= persistEvery {
		err = persist(s.db, t)
	}
	notes := t.TakeNotifications()
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

// applyLevel applies a level entry (statemachine/level.go) and says what
// it did. A level above what this build reads stops the replica: every
// later entry may use an encoding it does not know, and applying them as
// malformed would make its table diverge.
func (s *diskSM) applyLevel(t *statemachine.Table, e *sm.Entry) error {
	from := t.Level()
	outcome, level := t.ApplyLevel(e.Index, e.Cmd)
	code := statemachine.CodeOK
	switch outcome {
	case statemachine.LevelRaised:
		s.setLevel(level)
		s.log.Info().Int("from", from).Int("to", level).Uint64("index", e.Index).Msg("cluster level raised: every member reads the encodings of this level")
	case statemachine.LevelUnchanged:
	case statemachine.LevelRefused:
		s.log.Warn().Int("level", from).Int("entry", level).Uint64("index", e.Index).Msg("cluster level entry below the applied level ignored: the level never falls")
	case statemachine.LevelMalformed:
		code = statemachine.CodeMalformed
		s.log.Error().Uint64("index", e.Index).Msg("malformed cluster level entry ignored")
	case statemachine.LevelUnreadable:
		s.log.Error().Int("level", level).Int("reads_up_to", statemachine.MaxLevel).Uint64("index", e.Index).
			Msg("the cluster moved to a level this build cannot read: stopping instead of diverging; run a newer build on this data dir")
		return fmt.Errorf("apply entry %d: cluster level %d: %w", e.Index, level, statemachine.ErrLevelUnreadable)
	}
	e.Result = sm.Result{Value: uint64(code), Data: statemachine.EncodeResult(statemachine.Result{Code: code, WaitPosition: -1})}
	return nil
}

func (s *diskSM) setLevel(l int) {
	if s.level != nil {
		s.level.Store(int64(l))
	}
}

// persist writes the locks t changed since the last persist, with the
// applied index (last: see storage.Batch.Commit) and clock.
func persist(db *storage.DB, t *statemachine.Table) error {
	b := db.NewBatch()
	defer b.Discard()
	t.WriteChanges(b)
	return b.Commit()
}

// Lookup answers read-only queries (see query.go).
func (s *diskSM) Lookup(q interface{}) (interface{}, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.table.Lookup(q)
}

// nextGrant and inHandOff are the proposers' hints (Node.NextGrant,
// Node.inHandOff), read straight from the table: through dragonboat's
// StaleRead every one boxed its query and answer, an allocation or two
// on every release and every blocking acquire.
func (s *diskSM) nextGrant(kind statemachine.Kind, key, owner string) statemachine.NextGrant {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.table.NextGrant(kind, key, owner)
}

func (s *diskSM) inHandOff(kind statemachine.Kind, key, owner string) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.table.InHandOff(kind, key, owner)
}

// Sync makes every applied batch durable: dragonboat calls it before it
// records a snapshot and compacts the log behind it.
func (s *diskSM) Sync() error {
	if err := s.flush(); err != nil {
		return err
	}
	return s.db.Sync()
}

// flush writes the locks changed since the last persist, with the applied
// index and clock.
func (s *diskSM) flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.table
	if err := persist(s.db, t); err != nil {
		return fmt.Errorf("persist applied entries: %w", err)
	}
	return nil
}

// PrepareSnapshot captures a point-in-time view. Update is excluded while
// it runs and flush writes what it has not written yet, so the view holds
// exactly the state at the last applied index.
func (s *diskSM) PrepareSnapshot() (interface{}, error) {
	if err := s.flush(); err != nil {
		return nil, err
	}
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
	if err := saveSnapshotStream(view, cw, done); err != nil {
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

// RecoverFromSnapshot replaces the whole table with the snapshot's: a
// follower never keeps locks the leader no longer has.
func (s *diskSM) RecoverFromSnapshot(r io.Reader, done <-chan struct{}) error {
	t, err := readSnapshotStream(r)
	if err != nil {
		return err
	}
	select {
	case <-done:
		return sm.ErrSnapshotStopped
	default:
	}
	if err := replaceStore(s.db, t); err != nil {
		return err
	}
	s.mu.Lock()
	s.table = t
	s.mu.Unlock()
	s.setLevel(t.Level())
	s.log.Info().Uint64("applied", t.Applied()).Int("locks", t.Stats().Locks).Int("cluster_level", t.Level()).Msg("lock table recovered from snapshot")
	return nil
}

// Close writes what is not persisted yet, so a cleanly stopped node's
// store is complete (what `snapshot export` reads). The storage belongs to
// the caller, who closes it after the NodeHost.
func (s *diskSM) Close() error { return s.flush() }

// saveSnapshotStream writes a storage view as the Raft snapshot stream:
// a nacos_lock.zip archive of the current format followed by its checksum
// record (storage.WriteSnapshotStream). It is diskSM.SaveSnapshot's body.
func saveSnapshotStream(view *storage.View, w io.Writer, done <-chan struct{}) error {
	stopped := func() error {
		select {
		case <-done:
			return sm.ErrSnapshotStopped
		default:
			return nil
		}
	}
	return storage.WriteSnapshotStream(w, func(ew io.Writer) error {
		return statemachine.WriteStoredSnapshot(ew, view, stopped)
	})
}

// readSnapshotStream parses a Raft snapshot stream into a new table,
// verifying the archive's checksum. A stream without a checksum record is
// accepted only if its content is format 1, which predates the record:
// every later writer adds it, so its absence means the stream was cut.
func readSnapshotStream(r io.Reader) (*statemachine.Table, error) {
	var t *statemachine.Table
	err := storage.ReadSnapshotStream(r, maxArchiveBytes, maxEntryBytes, func(er io.Reader, check storage.ArchiveCheck) error {
		var err error
		t, err = statemachine.ReadSnapshotContent(er, check.Verified())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	return t, nil
}

// replaceStore makes db hold exactly t (never a merge): diskSM's
// RecoverFromSnapshot body after readSnapshotStream.
func replaceStore(db *storage.DB, t *statemachine.Table) error {
	if err := db.Replace(t.StoredPairs); err != nil {
		return fmt.Errorf("install snapshot: %w", err)
	}
	return nil
}
