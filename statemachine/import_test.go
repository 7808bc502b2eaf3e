package statemachine

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"nacos-lockd/storage"
	"nacos-lockd/storage/storagetest"
)

func TestNewImportedTable(t *testing.T) {
	const now = 10_000
	locks := []ImportedLock{
		// Input order does not matter: tokens follow (kind, key).
		{Kind: N, Key: "z-free", Waiters: []ImportedWaiter{{Owner: "dead", ConnID: "c", DeadlineMs: now, LeaseMs: 1}}},
		{Kind: R, Key: "held", Owner: "o1", ConnID: "c1", Count: 3, LeaseEndMs: now + 1,
			Waiters: []ImportedWaiter{
				{Owner: "w1", ConnID: "c2", EnqueuedMs: 5, DeadlineMs: now + 100, LeaseMs: 700},
				{Owner: "o1", ConnID: "c1", DeadlineMs: now + 100, LeaseMs: 700},          // the holder itself
				{Owner: "w1", ConnID: "c3", DeadlineMs: now + 200, LeaseMs: 700},          // owner queued twice
				{Owner: "w0", ConnID: "c4", DeadlineMs: now - 1, LeaseMs: 700},            // deadline passed
				{Owner: "w2", ConnID: "", EnqueuedMs: 6, DeadlineMs: 1 << 62, LeaseMs: 9}, // no deadline
			}},
		{Kind: G, Key: "expired", Owner: "legacy-migrated", Count: 1, LeaseEndMs: now - 1},
		{Kind: G, Key: "at-the-edge", Owner: "legacy-migrated", Count: 0, LeaseEndMs: now}, // count 0 held: counts 1
		{Kind: N, Key: "handed", Owner: "gone", ConnID: "x", Count: 1, LeaseEndMs: now - 5,
			Waiters: []ImportedWaiter{{Owner: "next", ConnID: "cn", EnqueuedMs: 1, DeadlineMs: now + 1, LeaseMs: 3000}, {Owner: "after", ConnID: "ca", DeadlineMs: now + 50, LeaseMs: 1}}},
	}
	tb, sum, err := NewImportedTable(locks, now)
	if err != nil {
		t.Fatal(err)
	}
	want := ImportSummary{Locks: 3, Held: 2, HandedOff: 1, Expired: 2, Free: 1, Waiters: 3, WaitersDropped: 4, TokenBase: 3}
	if sum != want {
		t.Fatalf("summary %+v, want %+v", sum, want)
	}
	checkTable(t, tb, 0, now, 3, 3, []wantLock{
		{lockID{G, "at-the-edge"}, lockState{owner: "legacy-migrated", count: 1, leaseEnd: now, token: 1}},
		{lockID{R, "held"}, lockState{owner: "o1", connID: "c1", count: 3, leaseEnd: now + 1, token: 2,
			waitq: &[]waiter{{"w1", "c2", 5, now + 100, 700}, {"w2", "", 6, 1 << 62, 9}}}},
		{lockID{N, "handed"}, lockState{owner: "next", connID: "cn", count: 1, leaseEnd: now + 3000, token: 3, acquiredAt: now, unclaimed: true,
			waitq: &[]waiter{{"after", "ca", 0, now + 50, 1}}}},
	})
	// Grants after the import get higher tokens, per key too.
	if r := tb.Apply(1, acq(N, "new", "o", "c", now, 100, 0)); r.Token != 4 {
		t.Fatalf("first grant after import: %+v", r)
	}
	if r := tb.Apply(2, acq(N, "handed", "next", "cn2", now, 100, 0)); r.Token != 3 || r.Count != 1 {
		t.Fatalf("claim of the handed-off grant: %+v", r)
	}
	if r := tb.Apply(3, rel(N, "handed", "next", now)); !r.Success() {
		t.Fatalf("release: %+v", r)
	}
	if l := tb.Lock(N, "handed"); l.Owner != "after" || l.Token != 6 {
		t.Fatalf("hand-off after import: %+v", l)
	}
	checkInvariants(t, tb)
}

func TestNewImportedTableRefuses(t *testing.T) {
	for name, locks := range map[string][]ImportedLock{
		"duplicate":       {{Kind: R, Key: "k", Owner: "a", Count: 1}, {Kind: R, Key: "k", Owner: "b", Count: 1}},
		"kind":            {{Kind: 9, Key: "k"}},
		"empty key":       {{Kind: R, Owner: "a", Count: 1}},
		"negative count":  {{Kind: R, Key: "k", Owner: "a", Count: -1}},
		"count, no owner": {{Kind: R, Key: "k", Count: 2}},
		"waiter lease":    {{Kind: R, Key: "k", Owner: "a", Count: 1, Waiters: []ImportedWaiter{{Owner: "w", DeadlineMs: 9}}}},
		"waiter owner":    {{Kind: R, Key: "k", Owner: "a", Count: 1, Waiters: []ImportedWaiter{{LeaseMs: 1, DeadlineMs: 9}}}},
	} {
		if _, _, err := NewImportedTable(locks, 0); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// Same key under two kinds is two locks.
	if _, sum, err := NewImportedTable([]ImportedLock{{Kind: R, Key: "k", Owner: "a", Count: 1, LeaseEndMs: 9}, {Kind: N, Key: "k", Owner: "a", Count: 1, LeaseEndMs: 9}}, 0); err != nil || sum.Locks != 2 {
		t.Fatalf("two kinds: %+v %v", sum, err)
	}
}

func TestInstallFresh(t *testing.T) {
	db := storagetest.OpenInMemory(t)
	src := replay(NewTable(), goldenCommands()) // a restore: applied 14, fence 13, base 0
	if err := InstallFresh(db, src); err != nil {
		t.Fatal(err)
	}
	if src.applied != 0 || src.tokenBase != 13 || src.fence != 13 {
		t.Fatalf("rebased table: applied %d base %d fence %d", src.applied, src.tokenBase, src.fence)
	}
	got, err := LoadStore(db)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.StateBytes(), src.StateBytes()) {
		t.Fatal("stored table differs from the installed one")
	}
	checkTable(t, got, 0, 5000, 13, 13, withScriptAcquiredAt(scriptLocks(0)))
	if err := InstallFresh(db, NewTable()); !errors.Is(err, ErrStoreNotEmpty) {
		t.Fatalf("second install: %v", err)
	}
	if r := got.Apply(1, acq(N, "after-restore", "o", "c", 6000, 10, 0)); r.Token != 14 {
		t.Fatalf("first token after restore %d, want 14", r.Token)
	}
}

// TestNodesOfImportedConns: the dead-node monitor's queries group
// connections by the node their id names. Nacos's ids (no node) and
// foreign ones, as an imported snapshot carries them, fall under "": no
// node of ours minted them, whatever their port reads as.
func TestNodesOfImportedConns(t *testing.T) {
	const now = 10_000
	const (
		ours1   = "1700000000000_10.0.0.1_5000_1"
		ours2   = "1700000000000_fe80::1%eth_0_5001_2" // a zone with '_'
		nacos   = "1699999999999_10.0.0.9_8848"
		nacos2  = "1699999999999_10.0.0.9_1" // port 1 is no node 1
		foreign = "nacos-conn"
	)
	tb, _, err := NewImportedTable([]ImportedLock{
		{Kind: N, Key: "a", Owner: "o1", ConnID: ours1, Count: 1, LeaseEndMs: now + 1000,
			Waiters: []ImportedWaiter{{Owner: "w1", ConnID: nacos, DeadlineMs: now + 1000, LeaseMs: 10}}},
		{Kind: N, Key: "b", Owner: "o2", ConnID: ours2, Count: 1, LeaseEndMs: now + 1000},
		{Kind: R, Key: "c", Owner: "o3", ConnID: nacos2, Count: 1, LeaseEndMs: now + 1000},
		{Kind: R, Key: "d", Owner: "o4", ConnID: foreign, Count: 1, LeaseEndMs: now + 1000},
	}, now)
	if err != nil {
		t.Fatal(err)
	}
	if got := tb.Nodes(); !slices.Equal(got, []string{"", "1", "2"}) {
		t.Fatalf("nodes %q", got)
	}
	for node, want := range map[string][]string{
		"":     {nacos2, nacos, foreign},
		"1":    {ours1},
		"2":    {ours2},
		"8848": nil,
		"5001": nil,
	} {
		if got := tb.Conns(node); !slices.Equal(got, want) {
			t.Errorf("conns of node %q: %q, want %q", node, got, want)
		}
	}
}

func streamOf(t *testing.T, tb *Table) []byte {
	t.Helper()
	db := storagetest.OpenInMemory(t)
	if err := db.Replace(tb.StoredPairs); err != nil {
		t.Fatal(err)
	}
	return storedStream(t, db)
}

// storedStream writes what db holds as a Raft snapshot stream, as the
// replica's SaveSnapshot does: the content in an archive with its checksum
// record.
func storedStream(t *testing.T, db *storage.DB) []byte {
	t.Helper()
	view := db.View()
	defer view.Close()
	var buf bytes.Buffer
	err := storage.WriteSnapshotStream(&buf, func(w io.Writer) error {
		return WriteStoredSnapshot(w, view, func() error { return nil })
	})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// readStream reads a Raft snapshot stream, as the replica's
// RecoverFromSnapshot does.
func readStream(r io.Reader) (*Table, error) {
	var tb *Table
	err := storage.ReadSnapshotStream(r, 1<<30, 1<<30, func(r io.Reader, check storage.ArchiveCheck) (err error) {
		tb, err = ReadSnapshotContent(r, check.Verified())
		return err
	})
	return tb, err
}

func TestSnapshotStreamRoundTrip(t *testing.T) {
	src := goldenV2Table(t)
	stream := streamOf(t, src)
	got, err := readStream(bytes.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.StateBytes(), src.StateBytes()) || got.tokenBase != 3 {
		t.Fatal("stream round trip changed the table")
	}
	// Replace installs it whole: nothing of the old content survives.
	db := storagetest.OpenInMemory(t)
	if err := db.Replace(replay(NewTable(), []Command{acq(N, "stale", "ghost", "c", 1, 1<<40, 0)}).StoredPairs); err != nil {
		t.Fatal(err)
	}
	if err := db.Replace(got.StoredPairs); err != nil {
		t.Fatal(err)
	}
	back, err := LoadStore(db)
	if err != nil || !bytes.Equal(back.StateBytes(), src.StateBytes()) {
		t.Fatalf("store after replace: %v", err)
	}

	n := len(stream)
	bad := bytes.Clone(stream)
	bad[n/2] ^= 0x10
	_, err = readStream(bytes.NewReader(bad))
	var mismatch *storage.ChecksumError
	if !errors.As(err, &mismatch) || !strings.Contains(err.Error(), "snapshot checksum mismatch: recorded ") {
		t.Fatalf("corrupt stream: %v", err)
	}
	// Format 2 and later without the record: cut short, refused.
	if _, err := readStream(bytes.NewReader(stream[:n-24])); err == nil || !strings.Contains(err.Error(), "without its checksum record") {
		t.Fatalf("v2 without record: %v", err)
	}
	// A format from the future says so.
	var future bytes.Buffer
	storage.WriteSnapshotStream(&future, func(w io.Writer) error {
		_, err := w.Write([]byte(snapshotMagic + "\x09"))
		return err
	})
	if _, err := readStream(&future); err == nil || !strings.Contains(err.Error(), "format version 9 is newer than this build understands") {
		t.Fatalf("future format: %v", err)
	}
}

// A table loaded from its store rebuilds every derived index: the
// invariants hold on it, not only its records.
func TestLoadStoreRebuildsIndexes(t *testing.T) {
	src := NewTable()
	for i, c := range randomCommands(21, 1500) {
		src.Apply(uint64(i+1), c)
	}
	db := storagetest.OpenInMemory(t)
	if err := db.Replace(src.StoredPairs); err != nil {
		t.Fatal(err)
	}
	back, err := LoadStore(db)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back.StateBytes(), src.StateBytes()) {
		t.Fatal("loaded table differs from the one stored")
	}
	checkInvariants(t, back)
}
