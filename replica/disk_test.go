package replica

import (
	"archive/zip"
	"bytes"
	"io"
	"testing"

	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/rs/zerolog"

	"nacos-lockd/storage"
	"nacos-lockd/storage/storagetest"

	"nacos-lockd/statemachine"
)

func entries(from uint64, cmds []statemachine.Command) []sm.Entry {
	out := make([]sm.Entry, len(cmds))
	for i, c := range cmds {
		out[i] = sm.Entry{Index: from + uint64(i), Cmd: c.Encode()}
	}
	return out
}

func openSM(t *testing.T, db *storage.DB, notify Notifier) *diskSM {
	t.Helper()
	s := newDiskSM(db, notify, zerolog.Nop())
	if _, err := s.Open(nil); err != nil {
		t.Fatalf("open: %v", err)
	}
	return s
}

func update(t *testing.T, s *diskSM, es []sm.Entry) []sm.Entry {
	t.Helper()
	out, err := s.Update(es)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	return out
}

func TestDiskSMPersistsOnSync(t *testing.T) {
	dir := t.TempDir()
	db, err := storage.Open(storage.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	var notes []statemachine.Notification
	s := openSM(t, db, func(n []statemachine.Notification) { notes = append(notes, n...) })
	cmds := randomCommands(21, 1500)
	for i := 0; i < len(cmds); i += 100 {
		update(t, s, entries(uint64(i+1), cmds[i:i+100]))
	}
	want := s.table.StateBytes()
	if len(notes) == 0 {
		t.Fatal("no hand-off notifications in 1500 random commands")
	}
	if err := s.Sync(); err != nil { // what dragonboat calls before a snapshot
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s2, applied := reopenDiskSM(t, dir)
	if applied != 1500 {
		t.Fatalf("applied after reopen %d, want 1500", applied)
	}
	if !bytes.Equal(s2.table.StateBytes(), want) {
		t.Fatal("reopened table differs from the one that was persisted")
	}
}

func TestDiskSMResults(t *testing.T) {
	s := openSM(t, storagetest.OpenInMemory(t), nil)
	out := update(t, s, entries(1, []statemachine.Command{
		acq(R, "k", "a", "c1", 100, 1000, 0),
		acq(R, "k", "b", "c2", 100, 1000, 5000),
	}))
	out = append(out, update(t, s, []sm.Entry{{Index: 3, Cmd: []byte("garbage")}})...)
	want := []statemachine.Result{ok(1, 1), queued(0), refused(statemachine.CodeMalformed)}
	for i, e := range out {
		got, err := statemachine.DecodeResult(e.Result.Data)
		if err != nil || got != want[i] || e.Result.Value != uint64(want[i].Code) {
			t.Fatalf("entry %d: %+v (%v), want %+v", i+1, got, err, want[i])
		}
	}
}

// saveSnapshot runs dragonboat's snapshot sequence and returns the archive.
func saveSnapshot(t *testing.T, s *diskSM) []byte {
	t.Helper()
	ctx, err := s.PrepareSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.SaveSnapshot(ctx, &buf, make(chan struct{})); err != nil {
		t.Fatalf("save snapshot: %v", err)
	}
	return buf.Bytes()
}

func TestDiskSMSnapshotIsNacosArchive(t *testing.T) {
	s := openSM(t, storagetest.OpenInMemory(t), nil)
	update(t, s, entries(1, randomCommands(4, 800)))
	archive := saveSnapshot(t, s)
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		t.Fatalf("snapshot is not a zip: %v", err)
	}
	if len(zr.File) != 1 || zr.File[0].Name != storage.ArchiveEntry {
		t.Fatalf("archive entries: %v", zr.File)
	}
	rc, err := zr.File[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	content, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(content, s.table.StateBytes()) {
		t.Fatal("archive content differs from the table's state bytes")
	}
}

func TestDiskSMReplicasProduceIdenticalSnapshots(t *testing.T) {
	a := openSM(t, storagetest.OpenInMemory(t), nil)
	b := openSM(t, storagetest.OpenInMemory(t), nil)
	cmds := randomCommands(9, 1200)
	// Different batching, same entries: state must not depend on it.
	update(t, a, entries(1, cmds))
	for i := range cmds {
		update(t, b, entries(uint64(i+1), cmds[i:i+1]))
	}
	if !bytes.Equal(saveSnapshot(t, a), saveSnapshot(t, b)) {
		t.Fatal("two replicas at the same index wrote different snapshots")
	}
}

func TestDiskSMRecoverReplacesEverything(t *testing.T) {
	leader := openSM(t, storagetest.OpenInMemory(t), nil)
	update(t, leader, entries(1, randomCommands(12, 900)))
	archive := saveSnapshot(t, leader)

	// The follower holds locks the leader never had; none may survive.
	followerDB := storagetest.OpenInMemory(t)
	follower := openSM(t, followerDB, nil)
	update(t, follower, entries(1, []statemachine.Command{
		acq(N, "stale-1", "ghost", "c9", 100, 1<<40, 0),
		acq(N, "stale-2", "ghost", "c9", 100, 1<<40, 0),
	}))
	if err := follower.RecoverFromSnapshot(bytes.NewReader(archive), make(chan struct{})); err != nil {
		t.Fatalf("recover: %v", err)
	}
	if !bytes.Equal(follower.table.StateBytes(), leader.table.StateBytes()) {
		t.Fatal("recovered table differs from the leader's")
	}
	// And what is on disk is the recovered table, not a merge.
	reopened := openSM(t, followerDB, nil)
	if !bytes.Equal(reopened.table.StateBytes(), leader.table.StateBytes()) {
		t.Fatal("persisted table after recovery differs from the leader's")
	}
	if reopened.table.Lock(N, "stale-1").Found {
		t.Fatal("a lock from before the snapshot survived recovery")
	}
	// Both continue identically.
	more := entries(leader.table.Applied()+1, randomCommands(13, 300))
	update(t, leader, more)
	update(t, follower, entries(leader.table.Applied()-299, randomCommands(13, 300)))
	if !bytes.Equal(follower.table.StateBytes(), leader.table.StateBytes()) {
		t.Fatal("replicas diverged after recovery")
	}
}

func TestDiskSMRejectsBadSnapshots(t *testing.T) {
	s := openSM(t, storagetest.OpenInMemory(t), nil)
	update(t, s, entries(1, []statemachine.Command{acq(N, "keep", "a", "c1", 100, 1<<40, 0)}))
	before := s.table.StateBytes()
	var notZip bytes.Buffer
	notZip.WriteString("PK but not really")
	var badContent bytes.Buffer
	if err := storage.WriteArchive(&badContent, func(w io.Writer) error {
		_, err := w.Write([]byte("nacos-lockd-locks\n\x01garbage"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"not a zip": notZip.Bytes(), "bad content": badContent.Bytes()} {
		if err := s.RecoverFromSnapshot(bytes.NewReader(b), make(chan struct{})); err == nil {
			t.Errorf("%s: accepted", name)
		}
		if !bytes.Equal(s.table.StateBytes(), before) {
			t.Fatalf("%s: a rejected snapshot changed the table", name)
		}
	}
}

func TestDiskSMLookups(t *testing.T) {
	s := openSM(t, storagetest.OpenInMemory(t), nil)
	update(t, s, entries(1, []statemachine.Command{acq(N, "k", "a", "c1", 100, 1000, 0)}))
	if v, err := s.Lookup(statemachine.StatsQuery{}); err != nil || v.(statemachine.Stats).Held != 1 {
		t.Fatalf("stats: %v %v", v, err)
	}
	if v, err := s.Lookup(statemachine.ExpiredQuery{NowMs: 2000, Limit: 10}); err != nil || len(v.([]statemachine.ExpiredLease)) != 1 {
		t.Fatalf("expired: %v %v", v, err)
	}
	if _, err := s.Lookup("what"); err == nil {
		t.Fatal("unknown lookup accepted")
	}
}

// Between the points where dragonboat asks for durability the table is not
// written: a reopened store is at an older applied index, from which
// dragonboat replays the log, and is consistent at that index.
func TestDiskSMDefersPersistence(t *testing.T) {
	dir := t.TempDir()
	db, err := storage.Open(storage.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	s := openSM(t, db, nil)
	cmds := randomCommands(22, 300)
	update(t, s, entries(1, cmds[:100]))
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	want := s.table.StateBytes()
	update(t, s, entries(101, cmds[100:]))
	if err := db.Close(); err != nil { // a crash: no Sync, no Close of the SM
		t.Fatal(err)
	}
	s2, applied := reopenDiskSM(t, dir)
	if applied != 100 {
		t.Fatalf("applied after reopen %d, want 100 (the last Sync)", applied)
	}
	if !bytes.Equal(s2.table.StateBytes(), want) {
		t.Fatal("reopened table differs from the one synced at index 100")
	}
	// Replaying the tail, as dragonboat does, reaches the same state.
	update(t, s2, entries(101, cmds[100:]))
	if !bytes.Equal(s2.table.StateBytes(), s.table.StateBytes()) {
		t.Fatal("replayed table differs from the original")
	}
}

// reopenDiskSM opens the store in dir again, as a restart does, and the
// state machine over it; it reports the index Open says was applied.
func reopenDiskSM(t *testing.T, dir string) (*diskSM, uint64) {
	t.Helper()
	db, err := storage.Open(storage.Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	s := newDiskSM(db, nil, zerolog.Nop())
	applied, err := s.Open(nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, applied
}
