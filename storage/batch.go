package storage

import (
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// Batch is a group of writes committed together. It is not safe for
// concurrent use. Writes are buffered (copied) until Commit; a later write to
// the same key wins. After Commit or Discard the Batch is empty and may be
// reused.
type Batch struct {
	db  *DB
	ops []batchOp
}

type batchOp struct {
	key, val []byte
	del      bool
}

// NewBatch returns an empty Batch.
func (db *DB) NewBatch() *Batch {
	return &Batch{db: db}
}

// Set records a write of val under key. Both are copied.
func (b *Batch) Set(key, val []byte) {
	// One allocation for both; the three-index slices keep them apart.
	buf := make([]byte, len(key)+len(val))
	n := copy(buf, key)
	copy(buf[n:], val)
	b.ops = append(b.ops, batchOp{key: buf[:n:n], val: buf[n:]})
}

// Delete records the removal of key (absent keys are fine). key is copied.
func (b *Batch) Delete(key []byte) {
	b.ops = append(b.ops, batchOp{key: clone(key), del: true})
}

// Len returns the number of writes recorded, repeats included.
func (b *Batch) Len() int {
	return len(b.ops)
}

// Discard drops the recorded writes.
func (b *Batch) Discard() {
	clear(b.ops) // let the copies go even though the array is reused
	b.ops = b.ops[:0]
}

// Commit applies the recorded writes and empties the Batch, whatever the
// outcome.
//
// The writes go in one badger transaction, so they are all-or-nothing, also
// across a crash. If they do not fit in one (badger's ErrTxnTooBig, about
// 15% of the memtable), Commit falls back to several transactions committed
// in order, and logs a warning: a crash or error can then leave a prefix of
// the batch applied. Because the order is kept, the batch's last write is
// committed last: a caller that writes its applied index last never finds
// that index stored without the rest of the batch.
func (b *Batch) Commit() error {
	ops := b.ops
	defer b.Discard()
	if len(ops) == 0 {
		return nil
	}
	if failpointsBuilt { // a constant: false in a release build
		if err := failpoint(); err != nil {
			return fmt.Errorf("commit batch: %w", err)
		}
	}
	db := b.db
	db.mu.RLock()
	defer db.mu.RUnlock()
	if db.closed {
		return ErrClosed
	}
	err := db.commitOne(ops)
	if !errors.Is(err, badger.ErrTxnTooBig) {
		return err
	}
	txns, err := db.commitSplit(ops)
	db.log.Warn().Int("writes", len(ops)).Int("transactions", txns).
		Msg("batch too big for one transaction; committed in several, so it was not atomic")
	return err
}

func (db *DB) commitOne(ops []batchOp) error {
	txn := db.bdb.NewTransaction(true)
	defer txn.Discard()
	for _, op := range ops {
		// ErrTxnTooBig surfaces here, before anything is committed.
		if err := apply(txn, op); err != nil {
			return err
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("commit batch: %w", err)
	}
	return nil
}

// commitSplit commits ops in order, starting a new transaction whenever the
// current one is full. It returns how many transactions it committed.
func (db *DB) commitSplit(ops []batchOp) (int, error) {
	txns := 0
	txn := db.bdb.NewTransaction(true)
	defer func() { txn.Discard() }()
	for _, op := range ops {
		err := apply(txn, op)
		if errors.Is(err, badger.ErrTxnTooBig) {
			if err := txn.Commit(); err != nil {
				return txns, fmt.Errorf("commit batch part %d: %w", txns+1, err)
			}
			txns++
			txn = db.bdb.NewTransaction(true)
			err = apply(txn, op) // a lone write that is still too big fails here
		}
		if err != nil {
			return txns, fmt.Errorf("batch partly committed (%d transactions): %w", txns, err)
		}
	}
	if err := txn.Commit(); err != nil {
		return txns, fmt.Errorf("commit batch part %d: %w", txns+1, err)
	}
	return txns + 1, nil
}

func apply(txn *badger.Txn, op batchOp) error {
	if op.del {
		if err := txn.Delete(op.key); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		return nil
	}
	if err := txn.Set(op.key, op.val); err != nil {
		return fmt.Errorf("set: %w", err)
	}
	return nil
}
