package walfile

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
)

// TestLogIsPaddedAheadOfItsWriter writes a log in small records across
// several chunks and checks that the file always reaches past the writer
// (so no sync after the first chunk moves its end), that its start is
// exactly what was written, and that the rest is zeros.
func TestLogIsPaddedAheadOfItsWriter(t *testing.T) {
	dir := t.TempDir()
	fs := FS{FS: vfs.Default}
	f, err := fs.Create(filepath.Join(dir, "000001.log"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.(*paddedFile); !ok {
		t.Fatalf("a log is a %T, want *paddedFile", f)
	}
	var want bytes.Buffer
	rec := make([]byte, 700)
	for i := 0; want.Len() < 3*Chunk+Chunk/3; i++ {
		for j := range rec {
			rec[j] = byte(i + j + 1) // never a zero run longer than a record
		}
		if _, err := f.Write(rec); err != nil {
			t.Fatal(err)
		}
		want.Write(rec)
		if i%50 == 0 {
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
		}
		st, err := os.Stat(filepath.Join(dir, "000001.log"))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() < int64(want.Len()) || st.Size()%Chunk != 0 {
			t.Fatalf("after %d bytes the file is %d bytes long: want a whole number of chunks reaching past the writer", want.Len(), st.Size())
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "000001.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:want.Len()], want.Bytes()) {
		t.Fatal("the log's start differs from what was written: padding overwrote data")
	}
	if tail := got[want.Len():]; len(tail) == 0 || !bytes.Equal(tail, make([]byte, len(tail))) {
		t.Fatalf("the %d bytes after the data are not all zeros", len(tail))
	}
	if len(got) > want.Len()+2*Chunk {
		t.Fatalf("file is %d bytes for %d written: padded more than two chunks ahead", len(got), want.Len())
	}
}

// bothWays runs test on a file system that writes the logs directly
// where it can, and on one that writes them through the page cache.
func bothWays(t *testing.T, test func(t *testing.T, fs FS)) {
	t.Run("direct", func(t *testing.T) { test(t, FS{FS: vfs.Default}) })
	t.Run("buffered", func(t *testing.T) { test(t, FS{FS: vfs.Default, buffered: true}) })
}

// TestReusedLogKeepsItsLength: a recycled log is written from its start
// and its old length counts as padding until the writer passes it. A
// direct write covers whole blocks: the rest of the writer's last block
// is zeros, an end of log to pebble as the old records are.
func TestReusedLogKeepsItsLength(t *testing.T) {
	bothWays(t, func(t *testing.T, fs FS) {
		dir := t.TempDir()
		old := filepath.Join(dir, "000001.log")
		if err := os.WriteFile(old, bytes.Repeat([]byte{7}, 3*Chunk), 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := fs.ReuseForWrite(old, filepath.Join(dir, "000002.log"))
		if err != nil {
			t.Fatal(err)
		}
		overwritten := 5
		if f.(*paddedFile).direct != nil {
			overwritten = block
		}
		if _, err := f.Write([]byte("entry")); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "000002.log"))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 3*Chunk || string(got[:5]) != "entry" || !bytes.Equal(got[5:overwritten], make([]byte, overwritten-5)) || got[overwritten] != 7 {
			t.Fatalf("reused log: %d bytes starting %q: want its old 3 chunks, overwritten from the start up to %d only", len(got), got[:6], overwritten)
		}
	})
}

// TestDirectSyncIsOnTheDisk: where the file system allows direct I/O (it
// does on ext4 and xfs, not on tmpfs), a log's data stays with the writer
// until Sync, which writes it in whole blocks; what Sync returned is in the
// file without Close, and so is what the writer wrote after going back to
// the page cache (leaveDirect, as after a refused direct write).
func TestDirectSyncIsOnTheDisk(t *testing.T) {
	name := filepath.Join(t.TempDir(), "000001.log")
	f, err := FS{FS: vfs.Default}.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	p := f.(*paddedFile)
	if p.direct == nil {
		t.Logf("%s refuses O_DIRECT: the log is written through the page cache", filepath.Dir(name))
	}
	read := func(n int) []byte {
		t.Helper()
		got, err := os.ReadFile(name)
		if err != nil || len(got) < n {
			t.Fatalf("read the log: %d bytes, %v", len(got), err)
		}
		return got[:n]
	}
	var want []byte
	for i := range 3000 {
		rec := bytes.Repeat([]byte{byte(i%250 + 1)}, 1+i%700)
		if _, err := p.Write(rec); err != nil {
			t.Fatal(err)
		}
		want = append(want, rec...)
		if p.direct != nil && p.tailOff+int64(p.tailLen) != int64(len(want)) {
			t.Fatalf("after %d bytes the tail ends at %d", len(want), p.tailOff+int64(p.tailLen))
		}
		if i%7 == 0 {
			if err := p.Sync(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(read(len(want)), want) {
				t.Fatalf("after a sync at %d bytes the file differs from what was written", len(want))
			}
			if p.direct != nil && (p.dirty || p.tailLen >= block || p.tailOff%block != 0) {
				t.Fatalf("after a sync the tail holds %d bytes from %d (dirty %v): want less than a block, from a block boundary", p.tailLen, p.tailOff, p.dirty)
			}
		}
		if i == 2000 && p.direct != nil {
			if err := p.leaveDirect(); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(read(len(want)), want) {
				t.Fatal("leaving direct writes lost what was written")
			}
		}
	}
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(read(len(want)), want) {
		t.Fatal("the file differs from what was written")
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestOtherFilesAreLeftAlone: tables, manifests and the rest come from the
// inner file system unwrapped (pebble keeps syncing them its own way).
func TestOtherFilesAreLeftAlone(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"000003.sst", "MANIFEST-000001", "OPTIONS-000002", "CURRENT"} {
		f, err := FS{FS: vfs.Default}.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := f.(*os.File); !ok {
			t.Errorf("%s is a %T, want the inner *os.File", name, f)
		}
		f.Close()
	}
}

// TestPebbleReplaysPaddedLogs opens a pebble database on the padded file
// system, writes synced batches across log rotations, and opens a copy of
// its directory taken while it is still open (what a crash leaves behind):
// every synced write is there, and the zeros after the last one end the
// replay instead of failing it.
func TestPebbleReplaysPaddedLogs(t *testing.T) { bothWays(t, pebbleReplaysPaddedLogs) }

func pebbleReplaysPaddedLogs(t *testing.T, fs FS) {
	dir := t.TempDir()
	db, err := pebble.Open(dir, &pebble.Options{FS: fs, MemTableSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	const n = 3000
	val := bytes.Repeat([]byte("v"), 300)
	for i := 0; i < n; i++ {
		if err := db.Set([]byte(fmt.Sprintf("k%06d", i)), val, pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if i == n/3 {
			if err := db.Flush(); err != nil { // a closed log, then a new one
				t.Fatal(err)
			}
		}
	}
	logs, padded := 0, 0
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if isLog(e.Name()) {
			logs++
			if info, err := e.Info(); err == nil && info.Size() > 0 && info.Size()%Chunk == 0 {
				padded++
			}
		}
	}
	if logs == 0 || padded == 0 {
		t.Fatalf("%d logs, %d of them padded: the database did not write through the padded file system", logs, padded)
	}

	image := t.TempDir()
	copyDir(t, dir, image)
	db2, err := pebble.Open(image, &pebble.Options{FS: fs})
	if err != nil {
		t.Fatalf("open the crash image: %v", err)
	}
	defer db2.Close()
	for i := 0; i < n; i++ {
		v, closer, err := db2.Get([]byte(fmt.Sprintf("k%06d", i)))
		if err != nil {
			t.Fatalf("key %d after replay: %v", i, err)
		}
		if !bytes.Equal(v, val) {
			t.Fatalf("key %d: value of %d bytes", i, len(v))
		}
		closer.Close()
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() || e.Name() == "LOCK" {
			continue
		}
		src, err := os.Open(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		dst, err := os.Create(filepath.Join(to, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(dst, src); err != nil {
			t.Fatal(err)
		}
		src.Close()
		dst.Close()
	}
}

// TestFailedPaddingNeverFailsTheLog: while padding fails (a full disk),
// the log appends unpadded and loses nothing; once padding works again it
// resumes past what was appended, never over it.
func TestFailedPaddingNeverFailsTheLog(t *testing.T) { bothWays(t, failedPaddingNeverFailsTheLog) }

func failedPaddingNeverFailsTheLog(t *testing.T, fs FS) {
	dir := t.TempDir()
	name := filepath.Join(dir, "000001.log")
	f, err := fs.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	p := f.(*paddedFile)
	var mu sync.Mutex
	failing := true
	writeAt := p.writeAt
	p.writeAt = func(b []byte, off int64) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return 0, syscall.ENOSPC
		}
		return writeAt(b, off)
	}
	var want bytes.Buffer
	rec := make([]byte, 4000)
	write := func(upTo int) {
		for i := 0; want.Len() < upTo; i++ {
			for j := range rec {
				rec[j] = byte(want.Len()/len(rec) + j + 1)
			}
			if _, err := p.Write(rec); err != nil {
				t.Fatalf("write at %d: %v", want.Len(), err)
			}
			want.Write(rec)
		}
	}
	write(2*Chunk + Chunk/2) // appended, padding failing all along
	if err := p.Sync(); err != nil {
		t.Fatal(err)
	}
	size := int64(want.Len())
	if p.direct != nil {
		size = roundUp(size) // direct writes are whole blocks
	}
	if st, _ := os.Stat(name); st.Size() != size {
		t.Fatalf("with padding failing the file is %d bytes, want exactly the %d written (%d with its last block)", st.Size(), want.Len(), size)
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	write(5 * Chunk)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) <= want.Len() {
		t.Fatalf("file is %d bytes for %d written: padding did not resume", len(got), want.Len())
	}
	if !bytes.Equal(got[:want.Len()], want.Bytes()) {
		t.Fatal("data differs from what was written: a pad after the failures overwrote it")
	}
	if tail := got[want.Len():]; !bytes.Equal(tail, make([]byte, len(tail))) {
		t.Fatal("the tail after the data is not zeros")
	}
}

// TestBusySyncHandsOffAndReports: a sync asks Busy each time; the sync
// that hands its P off (Busy true) keeps what was written and succeeds,
// and reports a failed fdatasync exactly as the plain one does.
func TestBusySyncHandsOffAndReports(t *testing.T) {
	dir := t.TempDir()
	name := filepath.Join(dir, "000001.log")
	asked := 0
	f, err := FS{FS: vfs.Default, Busy: func() bool { asked++; return true }}.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	rec := bytes.Repeat([]byte{7}, 512)
	for i := range 3 {
		if _, err := f.Write(rec); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatalf("sync %d handing off: %v", i, err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if asked < 3 {
		t.Fatalf("Busy asked %d times for 3 syncs", asked)
	}
	got, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:3*len(rec)], bytes.Repeat(rec, 3)) {
		t.Fatal("data written around the syncs differs")
	}

	// fdatasync fails on a pipe (EINVAL): both ways of syncing say so.
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, busy := range []bool{true, false} {
		p := &paddedFile{File: r, f: r, busy: func() bool { return busy }}
		err := p.Sync()
		var pe *os.PathError
		if !errors.As(err, &pe) || pe.Op != "fdatasync" || !errors.Is(err, syscall.EINVAL) {
			t.Fatalf("sync of a pipe (busy %v): %v, want fdatasync's EINVAL", busy, err)
		}
	}
}
