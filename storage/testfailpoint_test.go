//go:build testhooks

package storage

import (
	"errors"
	"testing"
)

// The chaos suite's disk-fail fault: while the failpoint fails, a commit
// returns its error and writes nothing; once removed, commits work again.
func TestFailpointFailsCommitWithoutWriting(t *testing.T) {
	db := openMem(t)
	injected := errors.New("injected")
	SetTestFailpoint(func() error { return injected })
	t.Cleanup(func() { SetTestFailpoint(nil) })

	b := db.NewBatch()
	b.Set([]byte("k"), []byte("v"))
	if err := b.Commit(); !errors.Is(err, injected) {
		t.Fatalf("commit with the failpoint set: %v, want the injected error", err)
	}
	if _, err := db.Get([]byte("k")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a failed commit wrote: %v", err)
	}

	SetTestFailpoint(nil)
	b = db.NewBatch()
	b.Set([]byte("k"), []byte("v"))
	if err := b.Commit(); err != nil {
		t.Fatalf("commit after the failpoint was removed: %v", err)
	}
	if got, err := db.Get([]byte("k")); err != nil || string(got) != "v" {
		t.Fatalf("after the failpoint: %q %v", got, err)
	}
}
