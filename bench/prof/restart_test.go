package prof

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/statemachine"
	"nacos-lockd/storage"
)

// TestLoadStoreTime times what a restart does first: open badger and load
// the whole lock table (W3's restart-to-ready is this plus Raft start and
// log replay). PROF_LOCKS sets the count (default 1000000); it runs only
// with -run LoadStore and PROF_LOCKS set, and reports, not asserts.
func TestLoadStoreTime(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("PROF_LOCKS"))
	if n == 0 {
		t.Skip("set PROF_LOCKS to run")
	}
	dir := t.TempDir()
	tb := statemachine.NewTable()
	now := time.Now().UnixMilli()
	for i := range n {
		c := i % 256
		conn := fmt.Sprintf("1764492000000_127.0.0.1_%d_1", 40000+c)
		tb.Apply(uint64(i+1), statemachine.Command{Op: statemachine.OpAcquire, NowMs: now, Kind: statemachine.KindNonReentrant,
			Key: fmt.Sprintf("bench-w3-1764492000000000000-%d", i), Owner: fmt.Sprintf("bench-%d-1764492000000000000", c), ConnID: conn, LeaseMs: 1800000})
	}
	db, err := storage.Open(storage.Config{Dir: dir, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := statemachine.InstallFresh(db, tb); err != nil {
		t.Fatal(err)
	}
	t.Logf("write %d locks: %v", n, time.Since(t0))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	t0 = time.Now()
	db, err = storage.Open(storage.Config{Dir: dir, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	opened := time.Since(t0)
	t1 := time.Now()
	back, err := statemachine.LoadStore(db)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("open badger %v, load %d locks %v", opened, len(back.Locks()), time.Since(t1))
}
