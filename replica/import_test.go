package replica

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/statemachine"
	"nacos-lockd/storage"
)

// A node started on a data dir made by InstallFresh (no Raft log yet)
// serves the installed locks, and its grants get tokens above them.
func TestStartOnInstalledStore(t *testing.T) {
	dir := t.TempDir()
	db, err := storage.Open(storage.Config{Dir: filepath.Join(dir, "locks")})
	if err != nil {
		t.Fatal(err)
	}
	tb, _, err := statemachine.NewImportedTable(goldenImport(), 900)
	if err != nil {
		t.Fatal(err)
	}
	if err := statemachine.InstallFresh(db, tb); err != nil {
		t.Fatal(err)
	}
	n, err := Start(RaftConfig{NodeHostDir: filepath.Join(dir, "raft"), RaftAddress: freeAddr(t)}, db, nil, zerolog.Nop())
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	defer db.Close()
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	l, err := n.Lock(R, "imported-r")
	if err != nil || l.Owner != "nacos-owner" || l.Count != 2 || l.Token != 2 || len(l.Waiters) != 1 {
		t.Fatalf("imported lock on the node: %+v %v", l, err)
	}
	st, err := n.Stats()
	if err != nil {
		t.Fatal(err)
	}
	if st.TokenBase != 3 {
		t.Fatalf("the node did not load the token base: %+v", st)
	}
	r := propose(t, n, acq(N, "fresh", "o", "c", 1000, 60000, 0))
	if !r.Success() || r.Token <= 3 {
		t.Fatalf("grant after import: %+v, want a token above 3", r)
	}
}
