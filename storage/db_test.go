package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/internal/syncbuf"
)

func openTest(tb testing.TB, cfg Config) *DB {
	tb.Helper()
	db, err := Open(cfg)
	if err != nil {
		tb.Fatalf("open: %v", err)
	}
	tb.Cleanup(func() {
		if err := db.Close(); err != nil {
			tb.Errorf("close: %v", err)
		}
	})
	return db
}

func openMem(tb testing.TB) *DB {
	tb.Helper()
	return openTest(tb, Config{InMemory: true})
}

func commit(tb testing.TB, db *DB, kv ...string) {
	tb.Helper()
	b := db.NewBatch()
	for i := 0; i+1 < len(kv); i += 2 {
		b.Set([]byte(kv[i]), []byte(kv[i+1]))
	}
	if err := b.Commit(); err != nil {
		tb.Fatalf("commit: %v", err)
	}
}

type pair struct{ key, val string }

func scanAll(tb testing.TB, scan func([]byte, func(k, v []byte) error) error, prefix string) []pair {
	tb.Helper()
	var got []pair
	if err := scan([]byte(prefix), func(k, v []byte) error {
		got = append(got, pair{string(k), string(v)})
		return nil
	}); err != nil {
		tb.Fatalf("scan %q: %v", prefix, err)
	}
	return got
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"in memory", Config{InMemory: true}, true},
		{"dir", Config{Dir: "/x"}, true},
		{"neither", Config{}, false},
		{"both", Config{Dir: "/x", InMemory: true}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.cfg.Validate(); (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
	if _, err := Open(Config{}); err == nil {
		t.Fatal("Open(Config{}) succeeded")
	}
}

func TestGetSetDelete(t *testing.T) {
	db := openMem(t)
	if _, err := db.Get([]byte("k")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get absent: err = %v, want ErrNotFound", err)
	}

	key, val := []byte("k"), []byte("v1")
	b := db.NewBatch()
	b.Set(key, val)
	key[0], val[0] = 'X', 'X' // Set copied them
	b.Set([]byte("empty"), nil)
	if b.Len() != 2 {
		t.Fatalf("Len = %d, want 2", b.Len())
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if b.Len() != 0 {
		t.Fatalf("Len after Commit = %d, want 0", b.Len())
	}

	got, err := db.Get([]byte("k"))
	if err != nil || string(got) != "v1" {
		t.Fatalf("Get = %q, %v; want v1", got, err)
	}
	got[0] = 'Z' // a copy: must not change the store
	if again, _ := db.Get([]byte("k")); string(again) != "v1" {
		t.Fatalf("Get after mutating result = %q, want v1", again)
	}
	if got, err := db.Get([]byte("empty")); err != nil || len(got) != 0 {
		t.Fatalf("Get empty value = %q, %v", got, err)
	}

	b.Delete([]byte("k"))
	b.Delete([]byte("never-there"))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Get([]byte("k")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get deleted: err = %v, want ErrNotFound", err)
	}
}

func TestBatchLaterWriteWins(t *testing.T) {
	db := openMem(t)
	commit(t, db, "gone", "old")
	b := db.NewBatch()
	b.Set([]byte("a"), []byte("1"))
	b.Set([]byte("a"), []byte("2"))
	b.Set([]byte("b"), []byte("1"))
	b.Delete([]byte("b"))
	b.Delete([]byte("c"))
	b.Set([]byte("c"), []byte("3"))
	b.Delete([]byte("gone"))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	want := []pair{{"a", "2"}, {"c", "3"}}
	if got := scanAll(t, db.Scan, ""); !slices.Equal(got, want) {
		t.Fatalf("content = %v, want %v", got, want)
	}
}

func TestBatchDiscard(t *testing.T) {
	db := openMem(t)
	b := db.NewBatch()
	b.Set([]byte("a"), []byte("1"))
	b.Discard()
	if b.Len() != 0 {
		t.Fatalf("Len after Discard = %d", b.Len())
	}
	b.Set([]byte("b"), []byte("2")) // reusable
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	want := []pair{{"b", "2"}}
	if got := scanAll(t, db.Scan, ""); !slices.Equal(got, want) {
		t.Fatalf("content = %v, want %v", got, want)
	}
	if err := db.NewBatch().Commit(); err != nil {
		t.Fatalf("empty Commit: %v", err)
	}
}

func TestBatchInvalidKey(t *testing.T) {
	db := openMem(t)
	for _, key := range []string{"", "!badger!x", strings.Repeat("k", 65001)} {
		b := db.NewBatch()
		b.Set([]byte("fine"), []byte("1"))
		b.Set([]byte(key), []byte("v"))
		if err := b.Commit(); err == nil {
			t.Errorf("Commit with key of %d bytes %.10q succeeded", len(key), key)
		}
	}
	if _, err := db.Get([]byte("fine")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a failed Commit wrote part of its batch: %v", err)
	}
}

// Keys sort as raw bytes, 0x00 and 0xff included, and prefixes select exactly
// the keys that start with them.
func TestScanOrderAndPrefix(t *testing.T) {
	keys := []string{
		"\x00", "\x00\x00", "\x00\xff", "a", "a\x00", "a\x00b", "ab", "abc", "a\xff", "b",
		"lock/1", "lock/10", "lock/2", "lock0", "\xff", "\xff\x00", "\xff\xff", "\xff\xff\xff",
	}
	db := openMem(t)
	b := db.NewBatch()
	for _, i := range []int{9, 3, 17, 0, 5, 12, 1, 14, 7, 16, 2, 11, 4, 15, 6, 13, 8, 10} {
		b.Set([]byte(keys[i]), []byte("v"+keys[i]))
	}
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		prefix string
		want   []string
	}{
		{"", keys},
		{"\x00", []string{"\x00", "\x00\x00", "\x00\xff"}},
		{"\xff", []string{"\xff", "\xff\x00", "\xff\xff", "\xff\xff\xff"}},
		{"\xff\xff", []string{"\xff\xff", "\xff\xff\xff"}},
		{"a", []string{"a", "a\x00", "a\x00b", "ab", "abc", "a\xff"}},
		{"a\x00", []string{"a\x00", "a\x00b"}},
		{"lock/", []string{"lock/1", "lock/10", "lock/2"}},
		{"abc", []string{"abc"}},
		{"abcd", nil},
		{"c", nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q", tt.prefix), func(t *testing.T) {
			var want []pair
			for _, k := range tt.want {
				want = append(want, pair{k, "v" + k})
			}
			if got := scanAll(t, db.Scan, tt.prefix); !slices.Equal(got, want) {
				t.Fatalf("Scan = %q, want %q", got, want)
			}
			v := db.View()
			defer v.Close()
			if got := scanAll(t, v.Scan, tt.prefix); !slices.Equal(got, want) {
				t.Fatalf("View.Scan = %q, want %q", got, want)
			}
		})
	}
	if !slices.IsSorted(keys) { // Go compares strings as bytes
		t.Fatal("test keys are not in byte order")
	}
}

func TestScanStopsOnError(t *testing.T) {
	db := openMem(t)
	commit(t, db, "a", "1", "b", "2", "c", "3")
	stop := errors.New("stop")
	var seen []string
	err := db.Scan(nil, func(k, _ []byte) error {
		seen = append(seen, string(k))
		if string(k) == "b" {
			return fmt.Errorf("wrapped: %w", stop)
		}
		return nil
	})
	if !errors.Is(err, stop) {
		t.Fatalf("Scan err = %v, want the callback's", err)
	}
	if !slices.Equal(seen, []string{"a", "b"}) {
		t.Fatalf("seen %q, want a, b", seen)
	}
}

func TestViewIsolation(t *testing.T) {
	db := openMem(t)
	commit(t, db, "x", "1", "y", "1")
	before := db.View()
	defer before.Close()

	b := db.NewBatch()
	b.Set([]byte("x"), []byte("2"))
	b.Delete([]byte("y"))
	b.Set([]byte("z"), []byte("2"))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}

	if got := scanAll(t, before.Scan, ""); !slices.Equal(got, []pair{{"x", "1"}, {"y", "1"}}) {
		t.Fatalf("old view sees %v", got)
	}
	if _, err := before.Get([]byte("z")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("old view Get(z) err = %v, want ErrNotFound", err)
	}
	after := db.View()
	defer after.Close()
	if got := scanAll(t, after.Scan, ""); !slices.Equal(got, []pair{{"x", "2"}, {"z", "2"}}) {
		t.Fatalf("new view sees %v", got)
	}
}

// Readers racing a writer never see half a batch.
func TestBatchAtomicUnderConcurrentViews(t *testing.T) {
	db := openMem(t)
	commit(t, db, "x", "0", "y", "0")
	const rounds = 300
	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, 2)
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				v := db.View()
				x, errX := v.Get([]byte("x"))
				y, errY := v.Get([]byte("y"))
				v.Close()
				if errX != nil || errY != nil || !bytes.Equal(x, y) {
					errs <- fmt.Errorf("view saw x=%q (%v) y=%q (%v)", x, errX, y, errY)
					return
				}
			}
		})
	}
	for i := 1; i <= rounds; i++ {
		n := fmt.Sprint(i)
		commit(t, db, "x", n, "y", n)
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

func TestReopenKeepsData(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	commit(t, db, "a", "1", "b", "2")
	b := db.NewBatch()
	b.Delete([]byte("a"))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db = openTest(t, Config{Dir: dir})
	if got := scanAll(t, db.Scan, ""); !slices.Equal(got, []pair{{"b", "2"}}) {
		t.Fatalf("after reopen: %v", got)
	}
}

func TestReplace(t *testing.T) {
	db := openMem(t)
	commit(t, db, "a", "old", "m", "old", "z", "old")
	buf := make([]byte, 1)
	err := db.Replace(func(put func(k, v []byte) error) error {
		for _, k := range []string{"m", "b", "c"} {
			buf[0] = k[0] // put must copy: the buffer is reused
			if err := put(buf, []byte("new")); err != nil {
				return err
			}
		}
		return put([]byte("b"), []byte("newer")) // a repeat: the last value wins
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []pair{{"b", "newer"}, {"c", "new"}, {"m", "new"}}
	if got := scanAll(t, db.Scan, ""); !slices.Equal(got, want) {
		t.Fatalf("after Replace: %v, want %v", got, want)
	}

	if err := db.Replace(func(func(k, v []byte) error) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if got := scanAll(t, db.Scan, ""); len(got) != 0 {
		t.Fatalf("after empty Replace: %v", got)
	}
}

func TestReplaceLarge(t *testing.T) {
	// More than one badger transaction's worth.
	db := openTest(t, Config{InMemory: true, memTableSize: 1 << 20})
	const n = 5000
	val := bytes.Repeat([]byte("v"), 100)
	err := db.Replace(func(put func(k, v []byte) error) error {
		for i := range n {
			if err := put(fmt.Appendf(nil, "k%05d", i), val); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := scanAll(t, db.Scan, ""); len(got) != n || got[n-1].key != fmt.Sprintf("k%05d", n-1) {
		t.Fatalf("after Replace: %d pairs", len(got))
	}
}

func TestReplaceFailureLeavesEmpty(t *testing.T) {
	db := openMem(t)
	commit(t, db, "a", "old")
	boom := errors.New("boom")
	err := db.Replace(func(put func(k, v []byte) error) error {
		if err := put([]byte("b"), []byte("new")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Replace err = %v, want boom", err)
	}
	if got := scanAll(t, db.Scan, ""); len(got) != 0 {
		t.Fatalf("after failed Replace: %v, want empty", got)
	}
	err = db.Replace(func(put func(k, v []byte) error) error {
		return put(nil, []byte("v")) // badger refuses empty keys
	})
	if err == nil {
		t.Fatal("Replace with an empty key succeeded")
	}
}

func TestReplaceOnDisk(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	commit(t, db, "a", "old")
	if err := db.Replace(func(put func(k, v []byte) error) error {
		return put([]byte("b"), []byte("new"))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, replaceMarker)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marker left after a successful Replace: %v", err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openTest(t, Config{Dir: dir})
	if got := scanAll(t, db.Scan, ""); !slices.Equal(got, []pair{{"b", "new"}}) {
		t.Fatalf("after reopen: %v", got)
	}
}

// A Replace that fails leaves its marker (the store is empty, and the next
// Open empties it again); a Replace after it writes over that marker and
// removes it when it succeeds.
func TestReplaceAfterFailedReplaceOnDisk(t *testing.T) {
	dir := t.TempDir()
	db := openTest(t, Config{Dir: dir})
	commit(t, db, "a", "old")
	boom := errors.New("boom")
	if err := db.Replace(func(put func(k, v []byte) error) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Replace err = %v, want boom", err)
	}
	if _, err := os.Stat(filepath.Join(dir, replaceMarker)); err != nil {
		t.Fatalf("no marker after a failed Replace: %v", err)
	}
	if err := db.Replace(func(put func(k, v []byte) error) error {
		return put([]byte("b"), []byte("new"))
	}); err != nil {
		t.Fatalf("Replace after a failed one: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, replaceMarker)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marker left after a successful Replace: %v", err)
	}
	if got := scanAll(t, db.Scan, ""); !slices.Equal(got, []pair{{"b", "new"}}) {
		t.Fatalf("after the second Replace: %v", got)
	}
}

// A crash inside Replace leaves the marker; the next Open empties the store
// instead of serving a partial one.
func TestOpenAfterInterruptedReplace(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(Config{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	commit(t, db, "partial", "1")
	if err := db.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, replaceMarker), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	db = openTest(t, Config{Dir: dir, Logger: zerolog.New(&logs)})
	if got := scanAll(t, db.Scan, ""); len(got) != 0 {
		t.Fatalf("after interrupted Replace: %v, want empty", got)
	}
	if _, err := os.Stat(filepath.Join(dir, replaceMarker)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("marker still there: %v", err)
	}
	if !strings.Contains(logs.String(), "interrupted") {
		t.Fatalf("no warning logged: %s", logs.String())
	}
}

// Replace waits for open Views: DropAll must not run under a reader.
func TestReplaceWaitsForViews(t *testing.T) {
	db := openMem(t)
	commit(t, db, "a", "old")
	v := db.View()
	replaced := make(chan error, 1)
	go func() {
		replaced <- db.Replace(func(put func(k, v []byte) error) error {
			return put([]byte("b"), []byte("new"))
		})
	}()
	select {
	case err := <-replaced:
		t.Fatalf("Replace returned (%v) while a View was open", err)
	case <-time.After(50 * time.Millisecond):
	}
	if got := scanAll(t, v.Scan, ""); !slices.Equal(got, []pair{{"a", "old"}}) {
		t.Fatalf("open view sees %v", got)
	}
	v.Close()
	if err := <-replaced; err != nil {
		t.Fatal(err)
	}
	if got := scanAll(t, db.Scan, ""); !slices.Equal(got, []pair{{"b", "new"}}) {
		t.Fatalf("after Replace: %v", got)
	}
}

// A batch over badger's transaction limit is committed in several
// transactions, in order, with a warning.
func TestBatchTooBigFallsBack(t *testing.T) {
	var logs syncbuf.Buffer
	db := openTest(t, Config{InMemory: true, memTableSize: 1 << 20, Logger: zerolog.New(&logs)})
	const n = 4000 // ~4000 * 100 bytes, well over 15% of 1 MiB
	val := bytes.Repeat([]byte("v"), 64)

	// A reader racing the commit must never see the last write (the
	// "applied index") without all the others.
	done := make(chan struct{})
	readerErr := make(chan error, 1)
	go func() {
		defer close(readerErr)
		for {
			select {
			case <-done:
				return
			default:
			}
			v := db.View()
			_, err := v.Get([]byte("meta"))
			count := 0
			if err == nil {
				_ = v.Scan([]byte("d/"), func(_, _ []byte) error { count++; return nil })
			}
			v.Close()
			if err == nil && count != n {
				readerErr <- fmt.Errorf("meta visible with %d of %d data keys", count, n)
				return
			}
		}
	}()

	b := db.NewBatch()
	for i := range n {
		b.Set(fmt.Appendf(nil, "d/%05d", i), val)
	}
	b.Set([]byte("meta"), []byte("applied"))
	err := b.Commit()
	close(done)
	if rerr := <-readerErr; rerr != nil {
		t.Error(rerr)
	}
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	got := scanAll(t, db.Scan, "d/")
	if len(got) != n {
		t.Fatalf("%d data keys, want %d", len(got), n)
	}
	if v, err := db.Get([]byte("meta")); err != nil || string(v) != "applied" {
		t.Fatalf("meta = %q, %v", v, err)
	}
	if !strings.Contains(logs.String(), "not atomic") || !strings.Contains(logs.String(), `"level":"warn"`) {
		t.Fatalf("no warning logged: %s", logs.String())
	}

	// Split, a bad write late in the batch leaves the parts before it
	// committed, and says so.
	for i := range n {
		b.Set(fmt.Appendf(nil, "e/%05d", i), val)
	}
	b.Set(nil, val)
	err = b.Commit()
	if err == nil || !strings.Contains(err.Error(), "partly committed") {
		t.Fatalf("Commit with a bad last key: err = %v, want a partial commit error", err)
	}
	if got := scanAll(t, db.Scan, "e/"); len(got) == 0 || len(got) == n {
		t.Fatalf("%d of %d writes before the bad one committed, want a prefix", len(got), n)
	}
}

func TestSmallBatchLogsNothing(t *testing.T) {
	var logs syncbuf.Buffer
	db := openTest(t, Config{InMemory: true, Logger: zerolog.New(&logs).Level(zerolog.WarnLevel)})
	commit(t, db, "a", "1")
	if logs.Len() != 0 {
		t.Fatalf("unexpected log: %s", logs.String())
	}
}

func TestBadgerLogsAtDebug(t *testing.T) {
	var logs syncbuf.Buffer
	db := openTest(t, Config{Dir: t.TempDir(), Logger: zerolog.New(&logs).Level(zerolog.DebugLevel)})
	commit(t, db, "a", "1")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, `"component":"badger"`) || !strings.Contains(out, `"level":"debug"`) {
		t.Fatalf("badger logs missing: %s", out)
	}
	if strings.Contains(out, `\n"`) {
		t.Fatalf("trailing newline kept in a message: %s", out)
	}
}

func TestClosed(t *testing.T) {
	db, err := Open(Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	b := db.NewBatch()
	b.Set([]byte("a"), []byte("1"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := db.Get([]byte("a")); !errors.Is(err, ErrClosed) {
		t.Errorf("Get: %v", err)
	}
	if err := db.Scan(nil, func(_, _ []byte) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Scan: %v", err)
	}
	if err := b.Commit(); !errors.Is(err, ErrClosed) {
		t.Errorf("Commit: %v", err)
	}
	if err := db.Sync(); !errors.Is(err, ErrClosed) {
		t.Errorf("Sync: %v", err)
	}
	if err := db.Replace(func(func(k, v []byte) error) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("Replace: %v", err)
	}
	v := db.View()
	if _, err := v.Get([]byte("a")); !errors.Is(err, ErrClosed) {
		t.Errorf("View.Get: %v", err)
	}
	if err := v.Scan(nil, func(_, _ []byte) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Errorf("View.Scan: %v", err)
	}
	v.Close()
	v.Close()
}

func TestCloseWaitsForViews(t *testing.T) {
	db, err := Open(Config{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	commit(t, db, "a", "1")
	v := db.View()
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) while a View was open", err)
	case <-time.After(50 * time.Millisecond):
	}
	if got, err := v.Get([]byte("a")); err != nil || string(got) != "1" {
		t.Fatalf("View.Get during Close = %q, %v", got, err)
	}
	v.Close()
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
}

// The GC loop runs on its timer and stops with Close (TestMain checks that
// no goroutine is left).
func TestValueLogGCLoop(t *testing.T) {
	var logs syncbuf.Buffer
	db, err := Open(Config{Dir: t.TempDir(), gcInterval: 5 * time.Millisecond, memTableSize: 1 << 20,
		Logger: zerolog.New(&logs).Level(zerolog.WarnLevel)})
	if err != nil {
		t.Fatal(err)
	}
	// Values above the (test-sized) threshold go to the value log;
	// overwriting them leaves garbage for GC to consider.
	big := bytes.Repeat([]byte("g"), 200<<10)
	for range 5 {
		commit(t, db, "big", string(big))
	}
	for range 3 {
		select {
		case <-db.gcPasses:
		case <-time.After(10 * time.Second):
			t.Fatal("no GC pass")
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 0 {
		t.Fatalf("GC logged: %s", logs.String())
	}
}

func TestNoGCLoopInMemory(t *testing.T) {
	db := openMem(t)
	if db.gcStop != nil {
		t.Fatal("GC loop started for an in-memory store")
	}
}
