package storagetest

import (
	"testing"

	"nacos-lockd/storage"
)

// OpenInMemory opens an in-memory store that is closed when tb ends.
func OpenInMemory(tb testing.TB) *storage.DB {
	tb.Helper()
	db, err := storage.Open(storage.Config{InMemory: true})
	if err != nil {
		tb.Fatalf("open in-memory storage: %v", err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("close in-memory storage: %v", err)
		}
	})
	return db
}
