package statemachine

import (
	"archive/zip"
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"nacos-lockd/storage"
)

var updateGolden = flag.Bool("update", false, "rewrite the testdata golden of the current snapshot format")

// goldenCommands is the script behind every golden snapshot. Never change
// it: the goldens of old formats were made from it by old builds.
func goldenCommands() []Command {
	return []Command{
		acq(R, "order-1", "client-a", "conn-A", 1000, 30000, 0),
		acq(R, "order-1", "client-a", "conn-A", 1100, 30000, 0),
		acq(R, "order-1", "client-b", "conn-B", 1200, 30000, 60000),
		acq(R, "order-1", "client-c", "conn-C", 1300, 20000, 50000),
		acq(N, "job/nightly", "w1", "conn-B", 1400, 45000, 0),
		acq(G, "legacy", "conn-D", "conn-D", 1500, 10000, 0),
		acq(N, "handoff", "h1", "conn-A", 1600, 5000, 0),
		acq(N, "handoff", "h2", "conn-C", 1700, 8000, 40000),
		rel(N, "handoff", "h1", 1800),
		acq(G, "gone", "x", "conn-E", 1900, 1000, 0),
		rel(G, "gone", "x", 2000),
		acq(R, "键-🔒", "ü", "conn-F", 2100, 100000, 0),
		acq(N, "stale", "s", "conn-E", 2200, 100, 0),
		renew(R, "order-1", "client-a", "conn-A2", 5000, 30000),
	}
}

// goldenImport is what the format-2 golden starts from before the script:
// an import, so its token base is not zero.
func goldenImport() []ImportedLock {
	return []ImportedLock{
		{Kind: R, Key: "imported-r", Owner: "nacos-owner", ConnID: "nacos-conn", Count: 2, LeaseEndMs: 700000,
			Waiters: []ImportedWaiter{{Owner: "w1", ConnID: "nacos-conn-2", EnqueuedMs: 800, DeadlineMs: 900000, LeaseMs: 30000}}},
		{Kind: N, Key: "imported-expired", Owner: "o", ConnID: "c0", Count: 1, LeaseEndMs: 500,
			Waiters: []ImportedWaiter{{Owner: "w2", ConnID: "c2", EnqueuedMs: 700, DeadlineMs: 800000, LeaseMs: 10000}}},
		{Kind: G, Key: "imported-legacy", Owner: "legacy-migrated", Count: 1, LeaseEndMs: 600000},
	}
}

func replay(t *Table, cmds []Command) *Table {
	for _, c := range cmds {
		t.Apply(t.applied+1, c)
	}
	return t
}

type wantLock struct {
	id lockID
	l  lockState
}

func checkTable(t *testing.T, got *Table, applied uint64, clock int64, fence, tokenBase uint64, want []wantLock) {
	t.Helper()
	if got.applied != applied || got.clock != clock || got.fence != fence || got.tokenBase != tokenBase {
		t.Fatalf("meta: applied %d clock %d fence %d token base %d; want %d %d %d %d",
			got.applied, got.clock, got.fence, got.tokenBase, applied, clock, fence, tokenBase)
	}
	if got.locks.Len() != len(want) {
		t.Fatalf("%d locks, want %d", got.locks.Len(), len(want))
	}
	for _, w := range want {
		l, ok := got.lookup(w.id)
		if !ok {
			t.Fatalf("lock %v missing", w.id)
		}
		if l.owner != w.l.owner || l.connID != w.l.connID || l.count != w.l.count || l.leaseEnd != w.l.leaseEnd ||
			l.token != w.l.token || l.acquiredAt != w.l.acquiredAt || l.unclaimed != w.l.unclaimed || len(l.queue()) != len(w.l.queue()) {
			t.Fatalf("lock %v:\n got %s\nwant %s", w.id, describe(l), describe(&w.l))
		}
		for i := range l.queue() {
			if l.queue()[i] != w.l.queue()[i] {
				t.Fatalf("lock %v waiter %d: got %+v, want %+v", w.id, i, l.queue()[i], w.l.queue()[i])
			}
		}
	}
	checkInvariants(t, got)
}

// The locks the script leaves, with tokens shifted by base. Formats 1
// and 2 predate acquiredAt: their locks read with 0 (unknown).
func scriptLocks(base uint64) []wantLock {
	return []wantLock{
		{lockID{G, "legacy"}, lockState{owner: "conn-D", connID: "conn-D", count: 1, leaseEnd: 11500, token: base + 6}},
		{lockID{R, "order-1"}, lockState{owner: "client-a", connID: "conn-A2", count: 2, leaseEnd: 35000, token: base + 1,
			waitq: &[]waiter{{"client-b", "conn-B", 1200, 61200, 30000}, {"client-c", "conn-C", 1300, 51300, 20000}}}},
		{lockID{R, "键-🔒"}, lockState{owner: "ü", connID: "conn-F", count: 1, leaseEnd: 102100, token: base + 12}},
		{lockID{N, "handoff"}, lockState{owner: "h2", connID: "conn-C", count: 1, leaseEnd: 9800, token: base + 9, unclaimed: true}},
		{lockID{N, "job/nightly"}, lockState{owner: "w1", connID: "conn-B", count: 1, leaseEnd: 46400, token: base + 5}},
		{lockID{N, "stale"}, lockState{owner: "s", connID: "conn-E", count: 1, leaseEnd: 2300, token: base + 13}},
	}
}

// scriptAcquiredAt is when the script granted each of its locks (the
// clock of the granting entry: the hand-off of "handoff" is the release
// at 1800).
var scriptAcquiredAt = map[lockID]int64{
	{G, "legacy"}: 1500, {R, "order-1"}: 1000, {R, "键-🔒"}: 2100,
	{N, "handoff"}: 1800, {N, "job/nightly"}: 1400, {N, "stale"}: 2200,
}

// withScriptAcquiredAt sets the grant times a current build records.
func withScriptAcquiredAt(ws []wantLock) []wantLock {
	for i := range ws {
		ws[i].l.acquiredAt = scriptAcquiredAt[ws[i].id]
	}
	return ws
}

// forgetAcquiredAt zeroes every lock's acquiredAt, as a table written by a
// build that did not record it holds them.
func forgetAcquiredAt(t *Table) *Table {
	for _, l := range t.lockMap() {
		l.acquiredAt = 0
	}
	return t
}

func readGoldenStream(t *testing.T, name string) *Table {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var tb *Table
	err = storage.ReadSnapshotStream(f, 1<<30, 1<<30, func(r io.Reader, check storage.ArchiveCheck) (err error) {
		tb, err = ReadSnapshotContent(r, check.Verified())
		return err
	})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return tb
}

// Format 1, written by the first nacos-lockd (a bare archive, no checksum
// record in the stream): read forever, migrated to the current table.
func TestGoldenSnapshotV1(t *testing.T) {
	got := readGoldenStream(t, "snapshot-v1.zip")
	checkTable(t, got, 14, 5000, 13, 0, scriptLocks(0))
	// Upgrading gives exactly the state the same commands give today,
	// except that the grant times were not recorded then.
	want := forgetAcquiredAt(replay(NewTable(), goldenCommands()))
	if !bytes.Equal(got.StateBytes(), want.StateBytes()) {
		t.Fatal("v1 golden upgraded differs from replaying its commands on a current table")
	}
	// And both go on identically.
	more := randomCommands(31, 400)
	replay(got, more)
	replay(want, more)
	if !bytes.Equal(got.StateBytes(), want.StateBytes()) {
		t.Fatal("upgraded table diverged from a current one")
	}
}

func goldenV2Table(t *testing.T) *Table {
	t.Helper()
	tb, sum, err := NewImportedTable(goldenImport(), 900)
	if err != nil {
		t.Fatal(err)
	}
	if sum != (ImportSummary{Locks: 3, Held: 2, HandedOff: 1, Expired: 1, Waiters: 1, TokenBase: 3}) {
		t.Fatalf("import summary %+v", sum)
	}
	return replay(tb, goldenCommands())
}

// The locks goldenV2Table leaves: the script's plus the imported ones.
func v2Locks() []wantLock {
	return append(scriptLocks(3),
		wantLock{lockID{G, "imported-legacy"}, lockState{owner: "legacy-migrated", count: 1, leaseEnd: 600000, token: 1}},
		wantLock{lockID{R, "imported-r"}, lockState{owner: "nacos-owner", connID: "nacos-conn", count: 2, leaseEnd: 700000, token: 2,
			waitq: &[]waiter{{"w1", "nacos-conn-2", 800, 900000, 30000}}}},
		wantLock{lockID{N, "imported-expired"}, lockState{owner: "w2", connID: "c2", count: 1, leaseEnd: 10900, token: 3, unclaimed: true}},
	)
}

// Format 2: format 1 plus the token base (written by the build before
// format 3; records without acquiredAt).
func TestGoldenSnapshotV2(t *testing.T) {
	got := readGoldenStream(t, "snapshot-v2.stream")
	checkTable(t, got, 14, 5000, 16, 3, v2Locks())
	// Upgrading gives the state the same import and commands give today,
	// without the grant times the old build did not record...
	want := forgetAcquiredAt(goldenV2Table(t))
	if !bytes.Equal(got.StateBytes(), want.StateBytes()) {
		t.Fatal("v2 golden upgraded differs from importing and replaying its commands on a current table")
	}
	// ...and both go on identically.
	more := randomCommands(32, 400)
	replay(got, more)
	replay(want, more)
	if !bytes.Equal(got.StateBytes(), want.StateBytes()) {
		t.Fatal("upgraded table diverged from a current one")
	}
}

// goldenV3Commands follow goldenCommands in the format-3 golden: force
// releases (op 7, new with format 3) and a grant with its time recorded.
func goldenV3Commands() []Command {
	return []Command{
		forceRel(R, "order-1", 0, 6000),       // index 15: released at count 2, handed to client-b
		forceRel(N, "job/nightly", 999, 6050), // 16: names another grant: refused
		forceRel(G, "missing", 0, 6060),       // 17: nothing to release
		acq(N, "after-v3", "o3", "conn-G", 6100, 60000, 0),
	}
}

func goldenV3Table(t *testing.T) *Table {
	t.Helper()
	return replay(goldenV2Table(t), goldenV3Commands())
}

// Format 3 (current): format 2's header, records with acquiredAt.
func TestGoldenSnapshotV3(t *testing.T) {
	path := filepath.Join("testdata", "snapshot-v3.stream")
	if *updateGolden {
		writeGoldenStream(t, path, goldenV3Table(t))
	}
	got := readGoldenStream(t, "snapshot-v3.stream")
	// Force-released at 6000 with count 2: the first waiter is granted it
	// (token base 3 + index 15), client-c still waits.
	want := v3Locks(lockState{owner: "client-b", connID: "conn-B", count: 1, leaseEnd: 36000, token: 18, acquiredAt: 6000, unclaimed: true,
		waitq: &[]waiter{{"client-c", "conn-C", 1300, 51300, 20000}}})
	checkTable(t, got, 18, 6100, 21, 3, want)
	// Same state, same bytes: the golden's content is what this build writes.
	if content := goldenContent(t, path); !bytes.Equal(content, goldenV3Table(t).StateBytes()) {
		t.Fatal("snapshot-v3.stream content differs from what this build writes for the same state (run go test ./statemachine -run GoldenSnapshotV3 -update if the format changed on purpose, and add a new version instead)")
	}
}

// v3Locks is what the format-3 golden's script leaves, with order-1 as
// given (the script's last steps change it).
func v3Locks(order1 lockState) []wantLock {
	var want []wantLock
	for _, w := range withScriptAcquiredAt(v2Locks()) {
		switch w.id {
		case lockID{N, "imported-expired"}:
			w.l.acquiredAt = 900 // handed to its first waiter at the import
		case lockID{R, "order-1"}:
			w.l = order1
		}
		want = append(want, w)
	}
	return append(want, wantLock{lockID{N, "after-v3"}, lockState{owner: "o3", connID: "conn-G", count: 1, leaseEnd: 66100, token: 21, acquiredAt: 6100}})
}

// goldenV4Table is the format-3 golden's table after a level entry (index
// 19) and a CLAIM with LeaseAtNow, which that level allows (index 20):
// format 4 is written only above the baseline level.
func goldenV4Table(t *testing.T) *Table {
	t.Helper()
	tb := goldenV3Table(t)
	if o, _ := tb.ApplyLevel(19, EncodeLevel(LevelGate)); o != LevelRaised {
		t.Fatalf("level entry: %v", o)
	}
	// order-1 was handed to client-b unclaimed with token 18 (format 3's
	// script); the claim answered from a read at clock 6200.
	claim := Command{Op: OpClaim, NowMs: 6200, Kind: R, Key: "order-1", Owner: "client-b", ConnID: "conn-B", LeaseMs: 30000, Token: 18, LeaseAtNow: true}
	if r := tb.Apply(20, claim); r.Code != CodeOK {
		t.Fatalf("claim: %v", r.Code)
	}
	return tb
}

// Format 4 (current): format 3 with the cluster level.
func TestGoldenSnapshotV4(t *testing.T) {
	path := filepath.Join("testdata", "snapshot-v4.stream")
	if *updateGolden {
		writeGoldenStream(t, path, goldenV4Table(t))
	}
	got := readGoldenStream(t, "snapshot-v4.stream")
	if got.Level() != LevelGate {
		t.Fatalf("level %d, want %d", got.Level(), LevelGate)
	}
	// order-1 claimed by client-b: its lease runs from the read's clock.
	want := v3Locks(lockState{owner: "client-b", connID: "conn-B", count: 1, leaseEnd: 36200, token: 18, acquiredAt: 6000,
		waitq: &[]waiter{{"client-c", "conn-C", 1300, 51300, 20000}}})
	checkTable(t, got, 20, 6200, 21, 3, want)
	if content := goldenContent(t, path); !bytes.Equal(content, goldenV4Table(t).StateBytes()) {
		t.Fatal("snapshot-v4.stream content differs from what this build writes for the same state (run go test ./statemachine -run GoldenSnapshotV4 -update if the format changed on purpose, and add a new version instead)")
	}
	if SnapshotVersion != 4 {
		t.Fatal("a new format needs its own golden: keep snapshot-v4.stream and add snapshot-vN")
	}
}

// writeGoldenStream writes tb as a Raft snapshot stream golden (-update).
func writeGoldenStream(t *testing.T, path string, tb *Table) {
	t.Helper()
	var buf bytes.Buffer
	if err := storage.WriteSnapshotStream(&buf, tb.WriteSnapshot); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func goldenContent(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := zr.File[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	content, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return content
}

func FuzzReadSnapshot(f *testing.F) {
	for _, name := range []string{"snapshot-v1.zip", "snapshot-v2.stream", "snapshot-v3.stream", "snapshot-v4.stream"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		zr, err := zip.NewReader(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			f.Fatal(err)
		}
		rc, _ := zr.File[0].Open()
		content, _ := io.ReadAll(rc)
		rc.Close()
		f.Add(content)
	}
	f.Add([]byte(snapshotMagic + "\x03"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tb, version, err := ReadSnapshot(bytes.NewReader(b))
		if err != nil {
			return
		}
		checkInvariants(t, tb)
		// Whatever is accepted is written back in the current format for
		// its level (3 at the baseline, else 4) and reads back as the same
		// state.
		want := BaselineSnapshotVersion
		if tb.level > LevelBaseline {
			want = SnapshotVersion
		}
		again, v, err := ReadSnapshot(bytes.NewReader(tb.StateBytes()))
		if err != nil || v != want || !bytes.Equal(again.StateBytes(), tb.StateBytes()) {
			t.Fatalf("version %d accepted but does not round trip: %v", version, err)
		}
		// Its tokens stay below every later grant.
		fence := tb.fence
		if got := tb.Apply(tb.applied+1, acq(N, "fuzz-new-key", "o", "c", tb.clock, 10, 0)); got.Token <= fence {
			t.Fatalf("new token %d not above the fence %d it was read with", got.Token, fence)
		}
	})
}
