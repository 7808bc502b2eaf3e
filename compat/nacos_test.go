package compat

import (
	"archive/zip"
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"nacos-lockd/statemachine"
	"nacos-lockd/statemachine/lockview"
	"nacos-lockd/storage"
)

// t0 is the "now" of the fixtures (interop/nacos-snapshot-fixtures).
const t0 = 1_767_225_600_000

const (
	kG = statemachine.KindNacosLock
	kR = statemachine.KindReentrant
	kN = statemachine.KindNonReentrant
)

func fixture(name string) string { return filepath.Join("testdata", "nacos", name) }

func fixtureContent(tb testing.TB, name string) []byte {
	tb.Helper()
	zr, err := zip.OpenReader(filepath.Join(fixture(name), storage.ArchiveName))
	if err != nil {
		tb.Fatal(err)
	}
	defer zr.Close()
	rc, err := zr.File[0].Open()
	if err != nil {
		tb.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func importFixture(t *testing.T, name string) (*statemachine.Table, NacosReport) {
	t.Helper()
	tb, rep, err := ImportNacosSnapshot(fixture(name), NacosImportOptions{NowMs: t0})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if !rep.Check.Verified() || rep.Check.Source != storage.RaftMetaName {
		t.Fatalf("%s: checksum not verified against __raft_snapshot_meta: %+v", name, rep.Check)
	}
	return tb, rep
}

func checkLocks(t *testing.T, tb *statemachine.Table, want []lockview.Lock) {
	t.Helper()
	got := tb.Locks()
	if len(got) != len(want) {
		t.Fatalf("%d locks, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		w, g := want[i], got[i]
		w.Found = true
		if g.Type != w.Type || g.Key != w.Key || g.Owner != w.Owner || g.ConnID != w.ConnID || g.Count != w.Count ||
			g.LeaseEndMs != w.LeaseEndMs || g.Token != w.Token || g.Unclaimed != w.Unclaimed || len(g.Waiters) != len(w.Waiters) {
			t.Fatalf("lock %d:\n got %+v\nwant %+v", i, g, w)
		}
		for j := range w.Waiters {
			if g.Waiters[j] != w.Waiters[j] {
				t.Fatalf("lock %s waiter %d: got %+v, want %+v", w.Key, j, g.Waiters[j], w.Waiters[j])
			}
		}
	}
}

func TestImportGen1(t *testing.T) {
	tb, rep := importFixture(t, "gen1-concurrenthashmap")
	if rep.Generation != "Gen 1" || rep.MapType != "java.util.concurrent.ConcurrentHashMap" || rep.Entries != 6 ||
		rep.ByClass["MutexAtomicLock"] != 6 || rep.ByType["NACOS_LOCK"] != 6 || len(rep.ByClass) != 1 || len(rep.ByType) != 1 ||
		rep.LegacyMigrated != 2 || rep.ExpiredDropped != 2 || rep.FreeDropped != 2 || rep.WaitersRead != 0 {
		t.Fatalf("report %+v", rep)
	}
	if rep.Table != (statemachine.ImportSummary{Locks: 2, Held: 2, TokenBase: 2}) {
		t.Fatalf("table summary %+v", rep.Table)
	}
	// held-live and the non-BMP key survive; held-expired and held-until-now
	// (expiry not after the import time), released and never-acquired go.
	checkLocks(t, tb, []lockview.Lock{
		{Type: kG.String(), Key: "held-live", Owner: LegacyOwner, Count: 1, LeaseEndMs: t0 + 60_000, Token: 1},
		{Type: kG.String(), Key: "锁-🔑", Owner: LegacyOwner, Count: 1, LeaseEndMs: t0 + 120_000, Token: 2},
	})
	st := tb.Stats()
	if st.Applied != 0 || st.Clock != t0 || st.Fence != 2 || st.TokenBase != 2 {
		t.Fatalf("table meta %+v", st)
	}
}

func TestImportGen1Empty(t *testing.T) {
	tb, rep := importFixture(t, "gen1-empty")
	if rep.Generation != "empty" || rep.Entries != 0 || rep.MapType != "java.util.concurrent.ConcurrentHashMap" || tb.Stats().Locks != 0 {
		t.Fatalf("report %+v", rep)
	}
}

func TestImportGen2(t *testing.T) {
	for fix, mapType := range map[string]string{"gen2-hashmap": "HashMap", "gen2-concurrenthashmap": "java.util.concurrent.ConcurrentHashMap"} {
		t.Run(fix, func(t *testing.T) {
			tb, rep := importFixture(t, fix)
			if rep.Generation != "Gen 2" || rep.MapType != mapType || rep.Entries != 10 ||
				rep.ByClass["ReentrantAtomicLock"] != 4 || rep.ByClass["NonReentrantAtomicLock"] != 3 || rep.ByClass["MutexAtomicLock"] != 3 ||
				rep.ByType["REENTRANT"] != 4 || rep.ByType["NON_REENTRANT"] != 3 || rep.ByType["NACOS_LOCK"] != 3 ||
				rep.LegacyMigrated != 0 || rep.ExpiredDropped != 1 || rep.FreeDropped != 2 || rep.WaitersRead != 14 {
				t.Fatalf("report %+v", rep)
			}
			if rep.Table != (statemachine.ImportSummary{Locks: 7, Held: 6, HandedOff: 1, Expired: 1, Free: 2, Waiters: 12, WaitersDropped: 1, TokenBase: 7}) {
				t.Fatalf("table summary %+v", rep.Table)
			}
			var queue []lockview.Waiter
			for i := range 9 {
				queue = append(queue, lockview.Waiter{Owner: "q" + string(rune('0'+i)), ConnID: "conn-q" + string(rune('0'+i)), DeadlineMs: t0 + 1000*int64(i+1)})
			}
			checkLocks(t, tb, []lockview.Lock{
				{Type: kG.String(), Key: "migrated-held", Owner: LegacyOwner, Count: 1, LeaseEndMs: t0 + 70_000, Token: 1},
				{Type: kG.String(), Key: "mutex-3.3", Owner: "conn-E", ConnID: "conn-E", Count: 1, LeaseEndMs: t0 + 10_000, Token: 2},
				{Type: kR.String(), Key: "order-1", Owner: "client-uuid:42", ConnID: "conn-A", Count: 2, LeaseEndMs: t0 + 30_000, Token: 3,
					Waiters: []lockview.Waiter{{Owner: "client-b", ConnID: "conn-B", DeadlineMs: t0 + 60_000}, {Owner: "client-d", ConnID: "conn-D", DeadlineMs: math.MaxInt64}}},
				{Type: kR.String(), Key: "键-🔒", Owner: "ü", ConnID: "conn-I", Count: 1, LeaseEndMs: t0 + 100_000, Token: 4},
				{Type: kN.String(), Key: "free-with-waiters", Owner: "next", ConnID: "conn-G", Count: 1, LeaseEndMs: t0 + DefaultLockDefaultExpireMs, Token: 5, Unclaimed: true,
					Waiters: []lockview.Waiter{{Owner: "after", ConnID: "conn-H", DeadlineMs: t0 + 30_000}}},
				{Type: kN.String(), Key: "job/nightly", Owner: "worker-1", ConnID: "conn-B", Count: 1, LeaseEndMs: t0 + 45_000, Token: 6},
				{Type: kN.String(), Key: "long-queue", Owner: "h", ConnID: "conn-J", Count: 1, LeaseEndMs: t0 + 50_000, Token: 7, Waiters: queue},
			})
			var out bytes.Buffer
			if err := rep.Write(&out); err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"verified (__raft_snapshot_meta)", "Gen 2", "by type: NACOS_LOCK 3, NON_REENTRANT 3, REENTRANT 4",
				"imported: 7 locks (held 6, of which legacy-migrated 0; handed to their first waiter 1)", "dropped: 1 expired, 2 free",
				"waiters: 14 read, 12 kept, 1 dropped", "imported 1..7"} {
				if !strings.Contains(out.String(), want) {
					t.Errorf("report lacks %q:\n%s", want, out.String())
				}
			}
		})
	}
}

// The waiters' enqueue times come through too (lockview.Lock does not show them).
func TestImportGen2WaiterDetail(t *testing.T) {
	locks, _, err := DecodeNacosSnapshot(fixtureContent(t, "gen2-hashmap"), NacosImportOptions{NowMs: t0, WaiterLeaseMs: 1234})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range locks {
		if l.Key == "order-1" {
			want := []statemachine.ImportedWaiter{
				{Owner: "client-b", ConnID: "conn-B", EnqueuedMs: t0 - 500, DeadlineMs: t0 + 60_000, LeaseMs: 1234},
				{Owner: "client-c", ConnID: "conn-C", EnqueuedMs: t0 - 400, DeadlineMs: t0 - 1, LeaseMs: 1234},
				{Owner: "client-d", ConnID: "conn-D", EnqueuedMs: t0 - 300, DeadlineMs: math.MaxInt64, LeaseMs: 1234},
			}
			if len(l.Waiters) != 3 || l.Waiters[0] != want[0] || l.Waiters[1] != want[1] || l.Waiters[2] != want[2] {
				t.Fatalf("waiters %+v", l.Waiters)
			}
			return
		}
	}
	t.Fatal("order-1 not decoded")
}

func TestImportRefusesBadFixtures(t *testing.T) {
	for name, want := range map[string]string{
		"bad-unknown-class": "unexpected class com.example.Evil",
		"bad-cycle":         "a cycle",
	} {
		_, _, err := ImportNacosSnapshot(fixture(name), NacosImportOptions{NowMs: t0})
		if !errors.Is(err, ErrBadNacosSnapshot) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", name, err, want)
		}
	}
}

func TestImportRefusesWrongChecksum(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{storage.ArchiveName, storage.RaftMetaName} {
		b, err := os.ReadFile(filepath.Join(fixture("gen2-hashmap"), f))
		if err != nil {
			t.Fatal(err)
		}
		if f == storage.ArchiveName {
			b[len(b)-30] ^= 1 // inside the central directory: the zip still reads
		}
		os.WriteFile(filepath.Join(dir, f), b, 0o644)
	}
	_, _, err := ImportNacosSnapshot(dir, NacosImportOptions{NowMs: t0})
	var mismatch *storage.ChecksumError
	if !errors.As(err, &mismatch) || !strings.HasPrefix(err.Error(), "snapshot checksum mismatch: recorded ") {
		t.Fatalf("err = %v", err)
	}
}

// hessianOf builds small streams for the structural checks. Real data
// comes from the Java fixtures; these are deliberately broken.
func hstr(s string) []byte {
	if len(s) < 32 {
		return append([]byte{byte(len(s))}, s...)
	}
	return append([]byte{0x30 + byte(len(s)>>8), byte(len(s))}, s...)
}

func TestScanHessianRefuses(t *testing.T) {
	keyDef := append(append([]byte{'C'}, hstr(classLockKey)...), 0x92)
	keyDef = append(append(keyDef, hstr("lockType")...), hstr("key")...)
	key := append(append([]byte{0x60}, hstr("REENTRANT")...), hstr("k")...)
	lockDef := append(append([]byte{'C'}, hstr(classReentrant)...), 0x91)
	lockDef = append(lockDef, hstr("key")...)
	entry := func(field ...byte) []byte {
		b := append(append(bytes.Clone(keyDef), key...), lockDef...)
		return append(append(b, 0x61), field...)
	}
	for name, tt := range map[string]struct {
		b    []byte
		want string
	}{
		"not a map":        {hstr("hello"), "not a map"},
		"typed map":        {append(append([]byte{'M'}, hstr("java.util.TreeMap")...), 'Z'), "java.util.TreeMap"},
		"trailing":         {[]byte{'H', 'Z', 'N'}, "1 bytes after the map"},
		"no end":           {[]byte{'H'}, "ends early"},
		"string key":       {append([]byte{'H'}, hstr("k")...), "map key is not an object"},
		"null value":       {append(append([]byte{'H'}, append(keyDef, key...)...), 'N'), "map value is not an object"},
		"key as value":     {append(append([]byte{'H'}, append(keyDef, key...)...), 0x60, 1, 'a', 1, 'b'), "unexpected class " + classLockKey + " as map value"},
		"nested map":       {append(append([]byte{'H'}, entry('H', 'Z')...), 'Z'), "unexpected map"},
		"back reference":   {append(append([]byte{'H'}, entry('Q', 0x90)...), 'Z'), "a cycle"},
		"shared reference": {append(append([]byte{'H'}, append(append(keyDef, key...), 'Q', 0x91)...), 'Z'), "never shares objects"},
		"list type":        {append(append([]byte{'H'}, entry(append([]byte{0x71}, hstr("java.util.HashSet")...)...)...), 'Z'), "unexpected list type java.util.HashSet"},
		"huge list":        {append(append([]byte{'H'}, entry('X', 'I', 0x7f, 0xff, 0xff, 0xff)...), 'Z'), "list of 2147483647 elements"},
		"undefined class":  {[]byte{'H', 0x65}, "undefined class #5"},
		"bad utf-8":        {append(append([]byte{'H'}, entry(0x01, 0xff)...), 'Z'), "invalid UTF-8"},
		"unknown class def": {append(append([]byte{'H', 'C'}, hstr("java.lang.Runtime")...), 0x90),
			"unexpected class java.lang.Runtime"},
	} {
		_, err := scanHessian(tt.b)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tt.want)
		}
	}
	if _, err := scanHessian(append(append([]byte{'H'}, entry(0x01, 'x')...), 'Z')); err != nil {
		t.Fatalf("well-formed stream refused: %v", err)
	}
}

func TestDecodeTruncatedNeverPanics(t *testing.T) {
	content := fixtureContent(t, "gen2-hashmap")
	for n := range len(content) {
		if _, _, err := DecodeNacosSnapshot(content[:n], NacosImportOptions{NowMs: t0}); err == nil {
			t.Fatalf("truncated to %d of %d bytes: accepted", n, len(content))
		}
	}
}

func FuzzDecodeNacosSnapshot(f *testing.F) {
	for _, name := range []string{"gen1-concurrenthashmap", "gen1-empty", "gen2-hashmap", "gen2-concurrenthashmap", "bad-unknown-class", "bad-cycle"} {
		f.Add(fixtureContent(f, name))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		locks, _, err := DecodeNacosSnapshot(b, NacosImportOptions{NowMs: t0})
		if err != nil {
			if !errors.Is(err, ErrBadNacosSnapshot) {
				t.Fatalf("error outside ErrBadNacosSnapshot: %v", err)
			}
			return
		}
		// Whatever decodes either builds a table or is refused by it.
		if tb, _, err := statemachine.NewImportedTable(locks, t0); err == nil && tb.Stats().Fence != tb.Stats().TokenBase {
			t.Fatalf("imported table fence %d, token base %d", tb.Stats().Fence, tb.Stats().TokenBase)
		}
	})
}
