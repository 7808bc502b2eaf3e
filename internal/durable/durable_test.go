package durable

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCreateFileRefusesAnExistingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "f")
	if err := CreateFile(path, []byte("first")); err != nil {
		t.Fatal(err)
	}
	if err := CreateFile(path, []byte("second")); !errors.Is(err, os.ErrExist) {
		t.Fatalf("second CreateFile: %v, want ErrExist", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "first" {
		t.Fatalf("content %q (%v), want the first write's", b, err)
	}
}

func TestWriteFileCreatesOrReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	if err := WriteFile(path, []byte("a longer first content")); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(path, []byte("short")); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "short" {
		t.Fatalf("content %q (%v), want only the second write's", b, err)
	}
	if err := SyncDir(dir); err != nil {
		t.Fatal(err)
	}
	if err := WriteFile(filepath.Join(dir, "missing", "f"), nil); err == nil {
		t.Fatal("WriteFile into a missing directory succeeded")
	}
}
