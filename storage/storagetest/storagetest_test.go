package storagetest

import (
	"errors"
	"testing"

	"nacos-lockd/storage"
)

func TestOpenInMemory(t *testing.T) {
	var db *storage.DB
	t.Run("use", func(t *testing.T) {
		db = OpenInMemory(t)
		b := db.NewBatch()
		b.Set([]byte("k"), []byte("v"))
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
		if v, err := db.Get([]byte("k")); err != nil || string(v) != "v" {
			t.Fatalf("Get = %q, %v", v, err)
		}
	})
	// The subtest's Cleanup closed it.
	if _, err := db.Get([]byte("k")); !errors.Is(err, storage.ErrClosed) {
		t.Fatalf("after the test: err = %v, want ErrClosed", err)
	}
}
