package replica

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/storage"

	"nacos-lockd/statemachine"
)

func startInstalled(t *testing.T, dir string, cfg RaftConfig, install *statemachine.Table) *Node {
	t.Helper()
	db, err := storage.Open(storage.Config{Dir: filepath.Join(dir, "locks")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if install != nil {
		if err := statemachine.InstallFresh(db, install); err != nil {
			t.Fatal(err)
		}
	}
	cfg.NodeHostDir = filepath.Join(dir, "raft")
	n, err := Start(cfg, db, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.Close) // before db.Close: cleanups run last-in first-out
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

// A replica that joins a shard started on an imported table gets the
// table, once the installed state is sealed into a snapshot.
func TestJoinAfterSealedImport(t *testing.T) {
	if testing.Short() {
		t.Skip("two Raft replicas")
	}
	base := t.TempDir()
	tb, _, err := statemachine.NewImportedTable(goldenImport(), 900)
	if err != nil {
		t.Fatal(err)
	}
	a1, a2 := freeAddr(t), freeAddr(t)
	n1 := startInstalled(t, filepath.Join(base, "1"), RaftConfig{RaftAddress: a1, ReplicaID: 1}, tb)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n1.SealInstalledState(ctx); err != nil {
		t.Fatal(err)
	}
	propose(t, n1, acq(N, "after-import", "o", "c", 1000, 60000, 0))
	if err := n1.AddReplica(ctx, 2, a2); err != nil {
		t.Fatal(err)
	}
	n2 := startInstalled(t, filepath.Join(base, "2"), RaftConfig{RaftAddress: a2, ReplicaID: 2, Join: true}, nil)
	deadline := time.Now().Add(20 * time.Second)
	for {
		want, _ := n1.Stats()
		got, _ := n2.Stats()
		if got == want && got.Locks == 4 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("joiner %+v, leader %+v", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if l, _ := n2.Lock(R, "imported-r"); l.Owner != "nacos-owner" || l.Token != 2 || len(l.Waiters) != 1 {
		t.Fatalf("joiner's imported lock %+v", l)
	}
}
