package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"nacos-lockd/bench/load"
)

// A target with errors keeps its servers' logs (and only those); a target
// without errors keeps nothing, and neither does one with no logs to keep;
// the last run's logs go.
func TestKeepErrorLogs(t *testing.T) {
	work, dst := t.TempDir(), t.TempDir()
	write := func(rel, body string) {
		t.Helper()
		p := filepath.Join(work, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("nacos-lockd-3/node1/nacos-lockd-1.log", "leader changed")
	write("nacos-lockd-3/node1/data/raft/000042.log", "a write-ahead file")
	write("nacos-lockd-3/node1/data/MANIFEST", "data")
	write("nacos-lockd-3/cluster.conf", "127.0.0.1:1")
	write("zookeeper/zookeeper.log", "fine")
	stale := filepath.Join(dst, "redis-fsync-always", "redis-fsync-always.log")
	if err := os.MkdirAll(filepath.Dir(stale), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(stale, []byte("the last run's"), 0o644); err != nil {
		t.Fatal(err)
	}

	reps := []load.Report{
		{Target: "zookeeper", Errors: 0},
		{Target: "nacos-lockd-3", Errors: 5},
		{Target: "nacos-lockd-3", Errors: 329},
		{Target: "etcd-mutex", Errors: 1}, // never started here: nothing to keep
	}
	kept, err := keepErrorLogs(work, dst, reps)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(kept, []string{"nacos-lockd-3"}) {
		t.Fatalf("kept %v, want the one target with errors and logs, once", kept)
	}
	b, err := os.ReadFile(filepath.Join(dst, "nacos-lockd-3/node1/nacos-lockd-1.log"))
	if err != nil || string(b) != "leader changed" {
		t.Fatalf("the node's log: %q, %v", b, err)
	}
	for _, rel := range []string{"nacos-lockd-3/node1/data/raft/000042.log", "nacos-lockd-3/node1/data/MANIFEST",
		"nacos-lockd-3/cluster.conf", "zookeeper/zookeeper.log", "etcd-mutex", "redis-fsync-always"} {
		if _, err := os.Stat(filepath.Join(dst, rel)); !os.IsNotExist(err) {
			t.Errorf("%s copied (stat: %v): only the server logs of targets with errors are kept", rel, err)
		}
	}
}
