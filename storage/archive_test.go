package storage

import (
	"archive/zip"
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
	"time"
)

const (
	testMaxArchive = 1 << 20
	testMaxEntry   = 1 << 20
)

func writeArchive(tb testing.TB, content []byte, chunk int) []byte {
	tb.Helper()
	var buf bytes.Buffer
	err := WriteArchive(&buf, func(w io.Writer) error {
		for rest := content; len(rest) > 0; {
			n := min(chunk, len(rest))
			if _, err := w.Write(rest[:n]); err != nil {
				return err
			}
			rest = rest[n:]
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("WriteArchive: %v", err)
	}
	return buf.Bytes()
}

func readArchive(archive []byte, maxArchive, maxEntry int64) ([]byte, bool, error) {
	var got []byte
	called := false
	err := ReadArchive(bytes.NewReader(archive), maxArchive, maxEntry, func(r io.Reader) error {
		called = true
		var err error
		got, err = io.ReadAll(r)
		return err
	})
	return got, called, err
}

// testContent is compressible but not trivially so, like Hessian records.
func testContent(n int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = "lockownerconn-0123456789"[rng.IntN(24)]
	}
	return b
}

func TestArchiveRoundTrip(t *testing.T) {
	for _, size := range []int{0, 1, 1000, 200_000} {
		content := testContent(size)
		got, _, err := readArchive(writeArchive(t, content, 4096), testMaxArchive, testMaxEntry)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if !bytes.Equal(got, content) {
			t.Fatalf("size %d: content differs", size)
		}
	}
}

func TestArchiveDeterministic(t *testing.T) {
	content := testContent(100_000)
	want := writeArchive(t, content, len(content)+1)
	for _, chunk := range []int{1, 7, 4096, 65536} {
		if got := writeArchive(t, content, chunk); !bytes.Equal(got, want) {
			t.Fatalf("writing in %d-byte chunks changed the archive", chunk)
		}
	}
	if bytes.Equal(writeArchive(t, testContent(100_001), 4096), want) {
		t.Fatal("different content, same archive")
	}
}

// The archive is what Nacos writes, as archive/zip sees it.
func TestArchiveLayout(t *testing.T) {
	content := []byte("hessian bytes")
	archive := writeArchive(t, content, 3)
	zr, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		t.Fatal(err)
	}
	if len(zr.File) != 1 {
		t.Fatalf("%d entries", len(zr.File))
	}
	f := zr.File[0]
	if f.Name != "lock" || f.Method != zip.Deflate || f.Flags != 0x0808 {
		t.Fatalf("entry %q method %d flags %#04x; want lock, deflate, 0x0808", f.Name, f.Method, f.Flags)
	}
	if want := time.Date(1980, 1, 1, 0, 0, 0, 0, time.UTC); !f.Modified.Equal(want) {
		t.Fatalf("modified %v, want %v", f.Modified, want)
	}
	if len(f.Extra) != 0 {
		t.Fatalf("extra fields %x", f.Extra)
	}
	rc, err := f.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if got, err := io.ReadAll(rc); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("content %q, %v", got, err)
	}
}

func TestWriteArchiveFillError(t *testing.T) {
	boom := errors.New("boom")
	err := WriteArchive(io.Discard, func(io.Writer) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
}

// zipOf builds an archive with the given entries, each stored as DEFLATE.
func zipOf(tb testing.TB, entries ...struct {
	name string
	data []byte
}) []byte {
	tb.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, e := range entries {
		w, err := zw.Create(e.name)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := w.Write(e.data); err != nil {
			tb.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

type entry = struct {
	name string
	data []byte
}

func TestReadArchiveRejects(t *testing.T) {
	valid := writeArchive(t, testContent(5000), 4096)
	corrupt := bytes.Clone(valid)
	corrupt[len(corrupt)/3] ^= 0xff // inside the compressed data
	tests := []struct {
		name       string
		archive    []byte
		maxArchive int64
		want       error
	}{
		{"empty input", nil, testMaxArchive, ErrBadArchive},
		{"not a zip", []byte("PK\x03\x04 certainly not a zip file, just text"), testMaxArchive, ErrBadArchive},
		{"no entries", zipOf(t), testMaxArchive, ErrBadArchive},
		{"no lock entry", zipOf(t, entry{"other", []byte("x")}), testMaxArchive, ErrBadArchive},
		{"lock as a directory", zipOf(t, entry{"lock/", nil}), testMaxArchive, ErrBadArchive},
		{"lock in a folder", zipOf(t, entry{"dir/lock", []byte("x")}), testMaxArchive, ErrBadArchive},
		{"two entries", zipOf(t, entry{"lock", []byte("x")}, entry{"extra", []byte("y")}), testMaxArchive, ErrBadArchive},
		{"lock twice", zipOf(t, entry{"lock", []byte("x")}, entry{"lock", []byte("y")}), testMaxArchive, ErrBadArchive},
		{"corrupt data", corrupt, testMaxArchive, ErrBadArchive},
		{"archive over its limit", valid, int64(len(valid) - 1), ErrArchiveTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, called, err := readArchive(tt.archive, tt.maxArchive, testMaxEntry)
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if called {
				t.Fatal("read was called on a refused archive")
			}
		})
	}
	if _, _, err := readArchive(valid, int64(len(valid)), testMaxEntry); err != nil {
		t.Fatalf("archive exactly at its limit: %v", err)
	}
	if _, _, err := readArchive(valid, 0, testMaxEntry); err == nil {
		t.Fatal("zero limit accepted")
	}
}

func TestReadArchiveTruncated(t *testing.T) {
	valid := writeArchive(t, testContent(2000), 4096)
	for n := range len(valid) {
		_, called, err := readArchive(valid[:n], testMaxArchive, testMaxEntry)
		if !errors.Is(err, ErrBadArchive) {
			t.Fatalf("truncated to %d of %d bytes: err = %v, want ErrBadArchive", n, len(valid), err)
		}
		if called {
			t.Fatalf("truncated to %d bytes: read was called", n)
		}
	}
}

// A real zip bomb: 8 MiB of zeros deflate to a few KiB.
func TestReadArchiveZipBomb(t *testing.T) {
	bomb := zipOf(t, entry{"lock", make([]byte, 8<<20)})
	if len(bomb) > 64<<10 {
		t.Fatalf("bomb is %d bytes, not much of a bomb", len(bomb))
	}
	_, called, err := readArchive(bomb, testMaxArchive, 1<<20)
	if !errors.Is(err, ErrArchiveTooLarge) {
		t.Fatalf("err = %v, want ErrArchiveTooLarge", err)
	}
	if called {
		t.Fatal("read was called")
	}
	if got, _, err := readArchive(bomb, testMaxArchive, 8<<20); err != nil || len(got) != 8<<20 {
		t.Fatalf("at exactly the cap: %d bytes, %v", len(got), err)
	}
}

// The cap holds on its own, whatever size the archive declares.
func TestCappedReader(t *testing.T) {
	for _, tt := range []struct {
		size, limit int64
		ok          bool
	}{{10, 10, true}, {10, 11, true}, {11, 10, false}, {0, 1, true}, {1 << 20, 1000, false}} {
		r := &cappedReader{r: bytes.NewReader(make([]byte, tt.size)), left: tt.limit}
		got, err := io.ReadAll(r)
		if tt.ok && (err != nil || int64(len(got)) != tt.size) {
			t.Errorf("size %d limit %d: %d bytes, %v", tt.size, tt.limit, len(got), err)
		}
		if !tt.ok && (!errors.Is(err, ErrArchiveTooLarge) || int64(len(got)) > tt.limit) {
			t.Errorf("size %d limit %d: %d bytes, %v; want at most the limit and ErrArchiveTooLarge",
				tt.size, tt.limit, len(got), err)
		}
	}
}

func TestReadArchiveReadError(t *testing.T) {
	valid := writeArchive(t, testContent(100), 4096)
	boom := errors.New("boom")
	err := ReadArchive(bytes.NewReader(valid), testMaxArchive, testMaxEntry, func(io.Reader) error { return boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
}

// The entry rule is about names: a stored (uncompressed) "lock" entry, which
// archive/zip also reads, is accepted.
func TestReadArchiveStoredEntry(t *testing.T) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	w, err := zw.CreateHeader(&zip.FileHeader{Name: "lock", Method: zip.Store})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("stored")); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _, err := readArchive(buf.Bytes(), testMaxArchive, testMaxEntry); err != nil || string(got) != "stored" {
		t.Fatalf("got %q, %v", got, err)
	}
}
