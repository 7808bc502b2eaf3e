package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/rs/zerolog"

	"nacos-lockd/internal/durable"
)

// ErrNotFound is returned by Get when the key is absent.
var ErrNotFound = errors.New("storage: key not found")

// ErrClosed is returned by every operation on a closed DB, and by a closed View.
var ErrClosed = errors.New("storage: closed")

// Badger tuning for a lock table: many small records (a key of at most a few
// KiB, an owner, a deadline, a short wait queue), a small working set and a
// machine that also runs Raft. Badger's defaults target large datasets and
// reserve accordingly (64 MiB memtables, 2 GiB sparse value-log files, a
// 256 MiB block cache), so they are cut down here.
const (
	// memTableSize bounds both memtable memory and the largest atomic write:
	// badger refuses a transaction above 15% of it (ErrTxnTooBig), so 16 MiB
	// allows ~2.4 MiB per Batch: thousands of lock records, ample for one
	// dragonboat Update batch of lock commands. Memtables are allocated
	// whole but touched only as filled, so this costs address space more
	// than memory.
	memTableSize = 16 << 20
	// numMemtables caps memtables waiting for flush; flushing 16 MiB is quick
	// and three leave room for a burst without stalling writes.
	numMemtables = 3
	// valueLogFileSize: values below valueThreshold live in the LSM tree, so
	// the value log only receives rare oversized records (a lock with a huge
	// wait queue). Badger creates each file sparse at twice this size.
	valueLogFileSize = 32 << 20
	// valueThreshold is badger's maximum: every realistic record is stored
	// inline, so reads never touch the value log and little needs GC.
	valueThreshold = 1 << 20

	// gcInterval and gcDiscardRatio drive value-log GC. It only reclaims
	// space left by overwritten or deleted oversized values, so it runs
	// rarely; a pass with nothing to do returns at once.
	gcInterval     = 10 * time.Minute
	gcDiscardRatio = 0.5
	// gcMaxRewrites bounds one GC pass, so it cannot hog a core.
	gcMaxRewrites = 8

	// replaceMarker is created in Dir before Replace drops the content and
	// removed once the new content is synced; Open empties a store on which
	// it finds one (see Replace).
	replaceMarker = "REPLACE-IN-PROGRESS"
)

// Config configures Open. The zero value is not usable: set Dir or InMemory.
type Config struct {
	// Dir is the data directory for badger files; required unless InMemory.
	Dir string
	// InMemory keeps everything in memory, for tests.
	InMemory bool
	// SyncWrites makes every commit fsync. The default, false, is right under
	// Raft: durability comes from Sync, which dragonboat calls, plus replay of
	// the Raft log for anything committed since.
	SyncWrites bool
	// Logger receives badger's own log lines (info and debug as debug) and
	// ours. The zero value discards them.
	Logger zerolog.Logger

	// Unexported knobs for tests; zero means the constant above.
	memTableSize int64
	gcInterval   time.Duration
}

// Validate reports a Config that Open would refuse.
func (c Config) Validate() error {
	switch {
	case c.InMemory && c.Dir != "":
		return errors.New("storage config: Dir must be empty when InMemory is set")
	case !c.InMemory && c.Dir == "":
		return errors.New("storage config: Dir is required unless InMemory is set")
	}
	return nil
}

// DB is the key/value store. Its methods are safe for concurrent use.
//
// Keys are non-empty, at most 65000 bytes, and must not start with
// "!badger!" (badger reserves that prefix); a write breaking these rules
// fails its Commit. Keys sort as plain bytes.
type DB struct {
	bdb *badger.DB
	log zerolog.Logger
	dir string // "" when in memory

	// mu is held shared by every operation that uses bdb, for its whole
	// duration (a View holds it until Close), and exclusively by Replace and
	// Close: badger's DropAll may crash concurrent readers, and nothing may
	// touch bdb after it is closed.
	mu     sync.RWMutex
	closed bool

	gcStop    chan struct{} // nil when no GC loop runs
	gcDone    chan struct{}
	gcPasses  chan struct{} // tests: one send per completed pass, never blocks
	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating if needed) the store described by cfg. If a previous
// Replace was interrupted by a crash, Open empties the store first (see
// Replace) and logs a warning.
func Open(cfg Config) (*DB, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger.With().Str("component", "storage").Logger()
	opts := badgerOptions(cfg)
	bdb, err := badger.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("open badger: %w", err)
	}
	db := &DB{bdb: bdb, log: log, dir: cfg.Dir}
	if !cfg.InMemory {
		if err := db.finishInterruptedReplace(); err != nil {
			_ = bdb.Close()
			return nil, err
		}
		interval := cfg.gcInterval
		if interval == 0 {
			interval = gcInterval
		}
		db.gcStop = make(chan struct{})
		db.gcDone = make(chan struct{})
		db.gcPasses = make(chan struct{}, 1)
		go db.gcLoop(interval)
	}
	return db, nil
}

func badgerOptions(cfg Config) badger.Options {
	mem := cfg.memTableSize
	if mem == 0 {
		mem = memTableSize
	}
	// Badger rejects a value threshold above its largest batch (15% of the
	// memtable); only the tests' tiny memtables get near that.
	threshold := min(int64(valueThreshold), mem*15/100)
	opts := badger.DefaultOptions(cfg.Dir)
	if cfg.InMemory {
		opts = badger.DefaultOptions("").WithInMemory(true)
	}
	return opts.
		WithLogger(badgerLogger{log: cfg.Logger.With().Str("component", "badger").Logger()}).
		WithSyncWrites(cfg.SyncWrites).
		WithNumVersionsToKeep(1).
		WithMemTableSize(mem).
		WithNumMemtables(numMemtables).
		WithValueThreshold(threshold).
		WithValueLogFileSize(valueLogFileSize).
		// No compression: records are short and mostly high-entropy IDs, and
		// badger already prefix-compresses keys within a block, so snappy
		// would spend compaction CPU on a 2-core machine for little space.
		// It also lets the block cache go: badger requires one only when
		// blocks are compressed or encrypted, and uncompressed blocks are
		// read straight from the mmapped tables (the page cache).
		WithCompression(options.None).
		WithBlockCacheSize(0).
		WithIndexCacheSize(0).
		// Two compactors is badger's minimum that compacts every level, and
		// matches the two cores.
		WithNumCompactors(2).
		// Verify each table's checksum once when it is opened: cheap for a
		// small store, and a corrupt replica should stop rather than serve
		// wrong lock state.
		WithChecksumVerificationMode(options.OnTableRead).
		// One writer (the Raft apply loop) and no read-modify-write
		// transactions through this API, so conflict tracking is pure cost.
		WithDetectConflicts(false).
		// Badger's metrics go to the global expvar registry; we export our
		// own through Prometheus.
		WithMetricsEnabled(false)
}

// Close stops the GC loop and closes badger. It waits for open Views to be
// closed. Calling it again returns the first call's result.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		// Stop GC before taking mu: a pass in progress holds mu shared.
		if db.gcStop != nil {
			close(db.gcStop)
			<-db.gcDone
		}
		db.mu.Lock()
		defer db.mu.Unlock()
		db.closed = true
		if err := db.bdb.Close(); err != nil {
			db.closeErr = fmt.Errorf("close badger: %w", err)
		}
	})
	return db.closeErr
}

// Sync makes every committed write durable (the memtable's write-ahead log
// and the value log are fsynced). A no-op in memory.
func (db *DB) Sync() error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	if err := db.bdb.Sync(); err != nil {
		return fmt.Errorf("sync badger: %w", err)
	}
	return nil
}

// Get returns a copy of the value stored under key, or ErrNotFound.
func (db *DB) Get(key []byte) ([]byte, error) {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return nil, ErrClosed
	}
	txn := db.bdb.NewTransaction(false)
	defer txn.Discard()
	return get(txn, key)
}

// Scan calls fn for every key with the given prefix (all keys when prefix is
// empty), in strictly ascending byte order, from one consistent snapshot.
// key and val are valid only during the call. An error from fn stops the
// scan and is returned as is.
func (db *DB) Scan(prefix []byte, fn func(key, val []byte) error) error {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	txn := db.bdb.NewTransaction(false)
	defer txn.Discard()
	return scan(txn, prefix, fn)
}

func get(txn *badger.Txn, key []byte) ([]byte, error) {
	item, err := txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}
	val, err := item.ValueCopy(nil)
	if err != nil {
		return nil, fmt.Errorf("read value: %w", err)
	}
	return val, nil
}

func scan(txn *badger.Txn, prefix []byte, fn func(key, val []byte) error) error {
	// Iterator, not Stream: Stream (and so Backup) is not key-ordered.
	// No prefetch: values are handed to fn in place instead of copied.
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	for it.Seek(prefix); it.Valid(); it.Next() {
		item := it.Item()
		var fnErr error
		err := item.Value(func(val []byte) error {
			fnErr = fn(item.Key(), val)
			return fnErr
		})
		if fnErr != nil {
			return fnErr // the caller's own error, unwrapped
		}
		if err != nil {
			return fmt.Errorf("read value: %w", err)
		}
	}
	return nil
}

// Replace replaces the whole content of the store with the pairs that the
// callback passes to put (which copies its arguments), as when a snapshot is
// recovered. It waits for open Views, commits and reads to finish, and
// blocks new ones until it returns.
//
// Replace is not atomic: badger cannot swap a whole keyspace in one
// transaction. It drops everything (badger's DropAll), then writes the pairs
// in as many transactions as they need, then syncs. What it guarantees
// instead:
//   - While it runs, nobody else can read or write (so nobody sees a mix).
//   - If the callback or a write fails, it empties the store again before
//     returning the error, so the store is complete or empty, never partial.
//   - If the process crashes between the drop and the final sync, the store
//     on disk may be empty or partial. A marker file written (and fsynced)
//     before the drop survives the crash, and the next Open empties the
//     store. A caller keeping its applied index in the store therefore finds
//     none after such a crash, and must get the snapshot again.
//
// The crash window is the drop plus the write of the new content; a caller
// that needs the old state back must keep the snapshot until Replace returns.
func (db *DB) Replace(pairs func(put func(key, val []byte) error) error) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return ErrClosed
	}
	if err := db.writeMarker(); err != nil {
		return err
	}
	if err := db.bdb.DropAll(); err != nil {
		return fmt.Errorf("replace: drop all: %w", err)
	}
	if err := db.fill(pairs); err != nil {
		// Empty rather than partial. If even this fails, the marker stays
		// and the next Open empties the store.
		if dropErr := db.bdb.DropAll(); dropErr != nil {
			db.log.Error().Err(dropErr).Msg("cannot empty the store after a failed replace; reopen it")
		}
		return err
	}
	if err := db.bdb.Sync(); err != nil {
		return fmt.Errorf("replace: sync: %w", err)
	}
	return db.removeMarker()
}

func (db *DB) fill(pairs func(put func(key, val []byte) error) error) error {
	// WriteBatch splits at badger's transaction limit and pipelines the
	// commits, in call order, so a repeated key ends with its last value.
	wb := db.bdb.NewWriteBatch()
	put := func(key, val []byte) error {
		// WriteBatch keeps the slices until its commit; the caller may reuse
		// its buffers as soon as put returns.
		if err := wb.Set(clone(key), clone(val)); err != nil {
			return fmt.Errorf("replace: write: %w", err)
		}
		return nil
	}
	if err := pairs(put); err != nil {
		wb.Cancel()
		return err
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("replace: flush: %w", err)
	}
	return nil
}

func (db *DB) writeMarker() error {
	if db.dir == "" {
		return nil
	}
	// A replace that failed left its marker behind: this one takes its
	// place.
	if err := durable.WriteFile(filepath.Join(db.dir, replaceMarker), nil); err != nil {
		return fmt.Errorf("replace: write marker: %w", err)
	}
	return durable.SyncDir(db.dir)
}

func (db *DB) removeMarker() error {
	if db.dir == "" {
		return nil
	}
	if err := os.Remove(filepath.Join(db.dir, replaceMarker)); err != nil {
		return fmt.Errorf("replace: remove marker: %w", err)
	}
	return durable.SyncDir(db.dir)
}

// finishInterruptedReplace empties the store if a Replace did not complete.
func (db *DB) finishInterruptedReplace() error {
	_, err := os.Stat(filepath.Join(db.dir, replaceMarker))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check replace marker: %w", err)
	}
	db.log.Warn().Msg("a snapshot recovery was interrupted; emptying the store so the snapshot can be applied again")
	if err := db.bdb.DropAll(); err != nil {
		return fmt.Errorf("empty store after interrupted replace: %w", err)
	}
	if err := db.bdb.Sync(); err != nil {
		return fmt.Errorf("sync store after interrupted replace: %w", err)
	}
	return db.removeMarker()
}

// gcLoop runs value-log GC every interval until Close.
func (db *DB) gcLoop(interval time.Duration) {
	defer close(db.gcDone)
	t := time.NewTimer(interval)
	defer t.Stop()
	for {
		select {
		case <-db.gcStop:
			return
		case <-t.C:
		}
		db.gcPass()
		select {
		case db.gcPasses <- struct{}{}:
		default:
		}
		t.Reset(interval)
	}
}

func (db *DB) gcPass() {
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return
	}
	for range gcMaxRewrites {
		select {
		case <-db.gcStop:
			return
		default:
		}
		// nil means one file was rewritten and there may be more;
		// ErrNoRewrite means nothing is worth it; anything else we log.
		err := db.bdb.RunValueLogGC(gcDiscardRatio)
		if err == nil {
			continue
		}
		if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
			db.log.Warn().Err(err).Msg("value log GC")
		}
		return
	}
}

func clone(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return append(make([]byte, 0, len(b)), b...)
}
