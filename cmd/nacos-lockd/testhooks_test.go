//go:build testhooks

package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

func TestTestHooksOffByDefault(t *testing.T) {
	h, err := startTestHooks("", zerolog.Nop())
	if err != nil || h != nil {
		t.Fatalf("hooks without a file: %v %v", h, err)
	}
	if h.clock() != nil || h.storageFailpoint() != nil {
		t.Fatal("nil hooks must leave the clock and storage alone")
	}
	h.attach(nil)
	h.stop()
}

type fakeTransferer struct{ n chan struct{} }

func (f fakeTransferer) TransferLeadership(context.Context) error {
	f.n <- struct{}{}
	return nil
}

func TestTestHooksFollowTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hooks")
	if err := os.WriteFile(path, []byte("clock-offset=90s\n# comment\nbogus line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := startTestHooks(path, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer h.stop()
	if d := time.Until(h.clock()()); d < 89*time.Second || d > 91*time.Second {
		t.Fatalf("clock offset %v, want 90s", d)
	}
	fp := h.storageFailpoint()
	if err := fp(); err != nil {
		t.Fatalf("failpoint before storage-fail: %v", err)
	}
	tr := fakeTransferer{n: make(chan struct{}, 1)}
	h.attach(tr)
	if err := os.WriteFile(path, []byte("storage-fail=true\ntransfer-leader=1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !errors.Is(fp(), errTestStorageFailure) {
		if time.Now().After(deadline) {
			t.Fatal("storage-fail not picked up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if d := time.Until(h.clock()()); d > time.Second {
		t.Fatalf("clock offset %v after it was removed from the file", d)
	}
	select {
	case <-tr.n:
	case <-time.After(5 * time.Second):
		t.Fatal("transfer-leader did not ask for a transfer")
	}
}
