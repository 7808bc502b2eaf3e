package main

import (
	"archive/zip"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/replica"
	"nacos-lockd/server"
	"nacos-lockd/statemachine"
	"nacos-lockd/storage"
)

// fixtureNow is the "now" of the Nacos fixtures in compat/testdata/nacos.
const fixtureNow = 1_767_225_600_000

func nacosFixture(name string) string {
	return filepath.Join("..", "..", "compat", "testdata", "nacos", name)
}

func atFixtureTime(t *testing.T) {
	t.Helper()
	old := importNowMs
	importNowMs = func() int64 { return fixtureNow }
	t.Cleanup(func() { importNowMs = old })
}

func loadStore(t *testing.T, dataDir string) *statemachine.Table {
	t.Helper()
	tb, err := loadDataDir(dataDir)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

func TestImportNacosCommand(t *testing.T) {
	atFixtureTime(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	var out bytes.Buffer
	if err := runImportNacos([]string{"--snapshot", nacosFixture("gen2-hashmap"), "--data-dir", dataDir}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"checksum: ", "verified (__raft_snapshot_meta)", "Gen 2, HashMap of 10 entries",
		"by class: MutexAtomicLock 3, NonReentrantAtomicLock 3, ReentrantAtomicLock 4",
		"imported: 7 locks (held 6, of which legacy-migrated 0; handed to their first waiter 1)",
		"dropped: 1 expired, 2 free", "waiters: 14 read, 12 kept, 1 dropped", "imported 1..7"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	tb := loadStore(t, dataDir)
	if st := tb.Stats(); st.Locks != 7 || st.Applied != 0 || st.TokenBase != 7 || st.Fence != 7 || st.Clock != fixtureNow {
		t.Fatalf("stored table %+v", st)
	}
	if l := tb.Lock(statemachine.KindReentrant, "order-1"); l.Owner != "client-uuid:42" || l.Count != 2 || len(l.Waiters) != 2 {
		t.Fatalf("order-1: %+v", l)
	}
	m, err := readImportMarker(dataDir)
	if err != nil || m.Locks != 7 || m.TokenBase != 7 || m.ImportedAtMs != fixtureNow || !filepath.IsAbs(m.Source) {
		t.Fatalf("marker %+v %v", m, err)
	}
	// A second import into the same dir is refused.
	err = runImportNacos([]string{"--snapshot", nacosFixture("gen2-hashmap"), "--data-dir", dataDir}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "is not empty") {
		t.Fatalf("second import: %v", err)
	}
}

func TestImportNacosGen1Command(t *testing.T) {
	atFixtureTime(t)
	dataDir := t.TempDir() // empty and existing is fine
	var out bytes.Buffer
	if err := runImportNacos([]string{"--data-dir", dataDir, "--snapshot", filepath.Join(nacosFixture("gen1-concurrenthashmap"), storage.ArchiveName)}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "legacy-migrated 2") || !strings.Contains(out.String(), "dropped: 2 expired, 2 free") {
		t.Fatalf("output:\n%s", out.String())
	}
	if l := loadStore(t, dataDir).Lock(statemachine.KindNacosLock, "锁-🔑"); l.Owner != "legacy-migrated" || l.ConnID != "" || l.LeaseEndMs != fixtureNow+120_000 {
		t.Fatalf("legacy lock %+v", l)
	}
}

// copyFixture copies a fixture directory so a test can damage it.
func copyFixture(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	os.Mkdir(dir, 0o755)
	for _, f := range []string{storage.ArchiveName, storage.RaftMetaName} {
		b, err := os.ReadFile(filepath.Join(nacosFixture(name), f))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	return dir
}

// rewriteArchive replaces a snapshot dir's archive and records its checksum
// in __raft_snapshot_meta, as Nacos would for that file.
func rewriteArchive(t *testing.T, dir string, archive []byte) {
	t.Helper()
	os.WriteFile(filepath.Join(dir, storage.ArchiveName), archive, 0o644)
	meta := storage.RaftMeta{HasSnapshotMeta: true, LastIncludedIndex: 1, Files: []storage.RaftFile{{Name: storage.ArchiveName, HasMeta: true, UserMeta: storage.NacosUserMeta(storage.ChecksumCRC64(archive))}}}
	os.WriteFile(filepath.Join(dir, storage.RaftMetaName), storage.EncodeRaftMeta(meta), 0o644)
}

func zipEntries(t *testing.T, entries map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, name := range []string{"lock", "extra"} {
		if b, ok := entries[name]; ok {
			w, _ := zw.Create(name)
			w.Write(b)
		}
	}
	zw.Close()
	return buf.Bytes()
}

func TestImportNacosRefusesBadInput(t *testing.T) {
	atFixtureTime(t)
	content := func() []byte {
		zr, _ := zip.OpenReader(filepath.Join(nacosFixture("gen2-hashmap"), storage.ArchiveName))
		defer zr.Close()
		rc, _ := zr.File[0].Open()
		b, _ := io.ReadAll(rc)
		return b
	}()
	cases := map[string]struct {
		snapshot func(t *testing.T) string
		want     string
	}{
		"unknown class": {func(*testing.T) string { return nacosFixture("bad-unknown-class") }, "unexpected class com.example.Evil"},
		"cycle":         {func(*testing.T) string { return nacosFixture("bad-cycle") }, "a cycle"},
		"wrong checksum": {func(t *testing.T) string {
			dir := copyFixture(t, "gen2-hashmap")
			b, _ := os.ReadFile(filepath.Join(dir, storage.ArchiveName))
			b[len(b)-30] ^= 1
			os.WriteFile(filepath.Join(dir, storage.ArchiveName), b, 0o644)
			return dir
		}, "snapshot checksum mismatch: recorded "},
		"truncated zip": {func(t *testing.T) string {
			dir := copyFixture(t, "gen2-hashmap")
			b, _ := os.ReadFile(filepath.Join(dir, storage.ArchiveName))
			rewriteArchive(t, dir, b[:len(b)/2])
			return dir
		}, "not a complete zip archive"},
		"extra entry": {func(t *testing.T) string {
			dir := copyFixture(t, "gen2-hashmap")
			rewriteArchive(t, dir, zipEntries(t, map[string][]byte{"lock": content, "extra": []byte("x")}))
			return dir
		}, `found 2 entries ["lock" "extra"]`},
		"missing entry": {func(t *testing.T) string {
			dir := copyFixture(t, "gen2-hashmap")
			rewriteArchive(t, dir, zipEntries(t, map[string][]byte{"extra": content}))
			return dir
		}, `want entry "lock", found "extra"`},
		"not hessian": {func(t *testing.T) string {
			dir := copyFixture(t, "gen2-hashmap")
			rewriteArchive(t, dir, zipEntries(t, map[string][]byte{"lock": []byte("nacos-lockd-locks\n\x02")}))
			return dir
		}, "not a map"},
		"no meta in dir": {func(t *testing.T) string {
			dir := copyFixture(t, "gen2-hashmap")
			os.Remove(filepath.Join(dir, storage.RaftMetaName))
			return dir
		}, "not a snapshot directory"},
	}
	for name, tt := range cases {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			dataDir := filepath.Join(parent, "data")
			err := runImportNacos([]string{"--snapshot", tt.snapshot(t), "--data-dir", dataDir}, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
			if entries, _ := os.ReadDir(parent); len(entries) != 0 {
				t.Fatalf("data dir touched: %v", entries)
			}
		})
	}
	// A data dir with something in it stays as it was.
	dataDir := t.TempDir()
	os.WriteFile(filepath.Join(dataDir, "keep"), []byte("x"), 0o644)
	if err := runImportNacos([]string{"--snapshot", nacosFixture("gen2-hashmap"), "--data-dir", dataDir}, io.Discard, io.Discard); err == nil {
		t.Fatal("imported into a non-empty data dir")
	}
	if entries, _ := os.ReadDir(dataDir); len(entries) != 1 {
		t.Fatalf("non-empty data dir changed: %v", entries)
	}
}

func TestImportAtStart(t *testing.T) {
	atFixtureTime(t)
	dataDir := filepath.Join(t.TempDir(), "data")
	snap := nacosFixture("gen2-concurrenthashmap")
	if err := importAtStart(snap, dataDir, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	if st := loadStore(t, dataDir).Stats(); st.Locks != 7 {
		t.Fatalf("imported %+v", st)
	}
	if !server.SealPending(dataDir) {
		t.Fatal("a fresh import is not pending a seal")
	}
	if err := server.MarkSealed(dataDir); err != nil || server.SealPending(dataDir) {
		t.Fatalf("after MarkSealed: %v, pending %v", err, server.SealPending(dataDir))
	}
	// Restart with the flag still set: nothing to do, nothing changed.
	os.MkdirAll(filepath.Join(dataDir, dataDirRaft), 0o750) // as after a first start
	if err := importAtStart(snap, dataDir, zerolog.Nop()); err != nil {
		t.Fatalf("restart with the same snapshot: %v", err)
	}
	// Another snapshot into the used dir is refused.
	err := importAtStart(nacosFixture("gen2-hashmap"), dataDir, zerolog.Nop())
	if err == nil || !strings.Contains(err.Error(), "imported from another snapshot") {
		t.Fatalf("other snapshot: %v", err)
	}
	// A used data dir that no import made is refused.
	used := t.TempDir()
	os.Mkdir(filepath.Join(used, dataDirLocks), 0o750)
	if err := importAtStart(snap, used, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "no import made it") {
		t.Fatalf("used dir: %v", err)
	}
}

func freeRaftAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// startNode starts a single replica on a data dir, as main does.
func startNode(t *testing.T, dataDir string) (*replica.Node, *storage.DB) {
	t.Helper()
	db, err := storage.Open(storage.Config{Dir: filepath.Join(dataDir, dataDirLocks)})
	if err != nil {
		t.Fatal(err)
	}
	n, err := replica.Start(replica.RaftConfig{NodeHostDir: filepath.Join(dataDir, dataDirRaft), RaftAddress: freeRaftAddr(t)}, db, nil, zerolog.Nop())
	if err != nil {
		db.Close()
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.WaitReady(ctx); err != nil {
		n.Close()
		db.Close()
		t.Fatal(err)
	}
	return n, db
}

func acquire(t *testing.T, n *replica.Node, kind statemachine.Kind, key, owner string, now int64) statemachine.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := n.Propose(ctx, statemachine.Command{Op: statemachine.OpAcquire, Kind: kind, Key: key, Owner: owner, ConnID: "c-" + owner, NowMs: now, LeaseMs: 600_000})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Import, run a node, export it, inspect the export, restore it into an
// empty dir and run a node there: the held locks come back, and new grants
// get tokens above every earlier one.
func TestSnapshotExportRestore(t *testing.T) {
	atFixtureTime(t)
	base := t.TempDir()
	src := filepath.Join(base, "src")
	if err := runImportNacos([]string{"--snapshot", nacosFixture("gen2-hashmap"), "--data-dir", src}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	n, db := startNode(t, src)
	if st, _ := n.Stats(); st.TokenBase != 7 {
		t.Fatalf("imported node did not load the token base: %+v", st)
	}
	r := acquire(t, n, statemachine.KindReentrant, "after-import", "o1", fixtureNow+1000)
	if !r.Success() {
		t.Fatalf("acquire on the imported node: %+v", r)
	}
	n.Close()
	db.Close()
	before := loadStore(t, src)

	// Export needs the store to itself: a running node is refused.
	snap := filepath.Join(base, "backup")
	var out bytes.Buffer
	if err := runSnapshot([]string{"export", "--data-dir", src, "--out", snap}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "exported 8 locks") {
		t.Fatalf("export output:\n%s", out.String())
	}
	if err := runSnapshot([]string{"export", "--data-dir", src, "--out", snap}, io.Discard, io.Discard); err == nil {
		t.Fatal("export over an existing snapshot")
	}

	out.Reset()
	if err := runSnapshot([]string{"inspect", snap, "--keys"}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"format: nacos-lockd snapshot, version 3", "verified (__raft_snapshot_meta)", "locks: 8 held (1 handed to a waiter",
		"by type: NACOS_LOCK 2, NON_REENTRANT 3, REENTRANT 3", `lock REENTRANT "after-import" owner="o1"`, `lock REENTRANT "键-🔒"`, "lease ends: oldest "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("inspect lacks %q:\n%s", want, out.String())
		}
	}

	dst := filepath.Join(base, "restored")
	out.Reset()
	if err := runSnapshot([]string{"restore", "--in", snap, "--data-dir", dst}, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "restored 8 locks") {
		t.Fatalf("restore output:\n%s", out.String())
	}
	after := loadStore(t, dst)
	if a, b := after.Stats(), before.Stats(); a.Applied != 0 || a.TokenBase != b.Fence || a.Fence != b.Fence || a.Locks != b.Locks || a.Clock != b.Clock {
		t.Fatalf("restored %+v from %+v", a, b)
	}
	for _, l := range before.Locks() {
		kind, _ := statemachine.ParseKind(l.Type)
		got := after.Lock(kind, l.Key)
		if got.Owner != l.Owner || got.Token != l.Token || got.LeaseEndMs != l.LeaseEndMs || got.Count != l.Count || len(got.Waiters) != len(l.Waiters) {
			t.Fatalf("restored %+v, was %+v", got, l)
		}
	}
	if !server.SealPending(dst) {
		t.Fatal("a restored data dir is not pending a seal")
	}
	n, db = startNode(t, dst)
	defer db.Close()
	defer n.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.SealInstalledState(ctx); err != nil {
		t.Fatal(err)
	}
	if err := server.MarkSealed(dst); err != nil || server.SealPending(dst) {
		t.Fatalf("seal: %v", err)
	}
	if l, err := n.Lock(statemachine.KindReentrant, "after-import"); err != nil || l.Owner != "o1" {
		t.Fatalf("restored node lost a held lock: %+v %v", l, err)
	}
	if r := acquire(t, n, statemachine.KindNonReentrant, "after-restore", "o2", fixtureNow+2000); !r.Success() || r.Token <= before.Stats().Fence {
		t.Fatalf("grant after restore: %+v, fence was %d", r, before.Stats().Fence)
	}
}

func TestSnapshotInspect(t *testing.T) {
	atFixtureTime(t)
	sm := filepath.Join("..", "..", "statemachine", "testdata")
	for file, wants := range map[string][]string{
		filepath.Join(sm, "snapshot-v1.zip"):    {"version 1 (this build writes 3, or 4 for a table above cluster level 1)", "cluster level: 1", "not recorded, not verified", "applied index: 14", "fence: 13", "token base: 0", "locks: 6 held (1 handed"},
		filepath.Join(sm, "snapshot-v2.stream"): {"version 2", "verified (stream checksum record)", "fence: 16", "token base: 3", `lock NACOS_LOCK "imported-legacy" owner="legacy-migrated"`},
		nacosFixture("gen1-concurrenthashmap"):  {"Nacos lock snapshot, Gen 1, java.util.concurrent.ConcurrentHashMap of 6 entries", "would keep 2 locks", `lock NACOS_LOCK "held-live"`},
	} {
		var out bytes.Buffer
		if err := runSnapshot([]string{"inspect", "--keys", file}, &out, io.Discard); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, want := range wants {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%s: output lacks %q:\n%s", file, want, out.String())
			}
		}
	}
	var out bytes.Buffer
	runSnapshot([]string{"inspect", filepath.Join(sm, "snapshot-v1.zip")}, &out, io.Discard)
	if strings.Contains(out.String(), "lock ") {
		t.Fatalf("keys listed without --keys:\n%s", out.String())
	}
}

func TestSnapshotRestoreRefuses(t *testing.T) {
	dir := t.TempDir()
	future := filepath.Join(dir, "future.zip")
	var buf bytes.Buffer
	storage.WriteSnapshotStream(&buf, func(w io.Writer) error {
		_, err := w.Write([]byte("nacos-lockd-locks\n\x07"))
		return err
	})
	os.WriteFile(future, buf.Bytes(), 0o644)
	bad := buf.Bytes()
	bad[40] ^= 1
	corrupt := filepath.Join(dir, "corrupt.zip")
	os.WriteFile(corrupt, bad, 0o644)
	for in, want := range map[string]string{
		future:                              "format version 7 is newer than this build understands",
		corrupt:                             "snapshot checksum mismatch",
		nacosFixture("gen2-hashmap"):        "use import-nacos",
		filepath.Join(dir, "missing"):       "no such file",
		filepath.Join("..", "..", "go.mod"): "not a complete zip archive",
	} {
		dataDir := filepath.Join(t.TempDir(), "data")
		err := runSnapshot([]string{"restore", "--in", in, "--data-dir", dataDir}, io.Discard, io.Discard)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", in, err, want)
		}
		if _, err := os.Stat(dataDir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: data dir created", in)
		}
	}
	// Not into a used data dir.
	used := t.TempDir()
	os.WriteFile(filepath.Join(used, "x"), nil, 0o644)
	err := runSnapshot([]string{"restore", "--in", filepath.Join("..", "..", "statemachine", "testdata", "snapshot-v1.zip"), "--data-dir", used}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Fatalf("used data dir: %v", err)
	}
	if err := runSnapshot([]string{"bogus"}, io.Discard, io.Discard); err == nil {
		t.Fatal("unknown subcommand accepted")
	}
}
