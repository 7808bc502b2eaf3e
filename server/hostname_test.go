package server

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestExplainRaftStart: dragonboat's refusal of a log written under
// another host name names that host and the flag that fixes it; its
// refusal of another Raft address names the flags that set it; any other
// error passes through unchanged.
func TestExplainRaftStart(t *testing.T) {
	raftDir := t.TempDir()
	if err := os.Mkdir(filepath.Join(raftDir, "nacos-lockd-0"), 0o700); err != nil {
		t.Fatal(err)
	}
	dbErr := errors.New("hostname changed")
	err := explainRaftStart(raftDir, "127.0.0.1:7848", dbErr)
	if !errors.Is(err, dbErr) || !strings.Contains(err.Error(), "written on a host named nacos-lockd-0") || !strings.Contains(err.Error(), "--hostname") {
		t.Fatalf("host name: %v", err)
	}
	dbErr = errors.New("not the owner of the data directory")
	err = explainRaftStart(raftDir, "127.0.0.1:7848", dbErr)
	if !errors.Is(err, dbErr) || !strings.Contains(err.Error(), "another Raft address than this start's 127.0.0.1:7848") || !strings.Contains(err.Error(), "--port") {
		t.Fatalf("Raft address: %v", err)
	}
	other := errors.New("disk full")
	if err := explainRaftStart(raftDir, "127.0.0.1:7848", other); err != other {
		t.Fatalf("other error: %v", err)
	}
	if err := explainRaftStart(raftDir, "127.0.0.1:7848", nil); err != nil {
		t.Fatalf("no error: %v", err)
	}
}
