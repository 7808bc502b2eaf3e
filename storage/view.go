package storage

import (
	"sync"

	"github.com/dgraph-io/badger/v4"
)

// View is a consistent, read-only, point-in-time view of the store: it sees
// every commit that finished before it was opened and none after. Use one
// from a single goroutine at a time, and Close it: an open View holds back
// Replace and Close, and keeps badger from discarding versions it may read.
//
// While a goroutine holds a View, it should read through the View only. A
// View holds the DB's lock shared; once a Replace or Close is waiting, any
// new DB call (or View) blocks until they are done, and they wait for this
// View, so the goroutine would wait for itself.
type View struct {
	db   *DB
	txn  *badger.Txn // nil when the DB was closed at open time
	once sync.Once
}

// View opens a View. On a closed DB the View's methods return ErrClosed.
func (db *DB) View() *View {
	db.mu.RLock() // released by Close
	if db.closed {
		db.mu.RUnlock()
		return &View{}
	}
	return &View{db: db, txn: db.bdb.NewTransaction(false)}
}

// Get returns a copy of the value stored under key, or ErrNotFound.
func (v *View) Get(key []byte) ([]byte, error) {
	if v.txn == nil {
		return nil, ErrClosed
	}
	return get(v.txn, key)
}

// Scan is DB.Scan on this View's point in time.
func (v *View) Scan(prefix []byte, fn func(key, val []byte) error) error {
	if v.txn == nil {
		return ErrClosed
	}
	return scan(v.txn, prefix, fn)
}

// Close releases the View. Calling it again does nothing.
func (v *View) Close() {
	v.once.Do(func() {
		if v.txn == nil {
			return
		}
		v.txn.Discard()
		v.txn = nil
		v.db.mu.RUnlock()
	})
}
