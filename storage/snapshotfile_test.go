package storage

import (
	"bytes"
	"errors"
	"hash/crc64"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCRC64(t *testing.T) {
	if got := ChecksumCRC64([]byte("123456789")); got != 0x6c40df5f0b497347 {
		t.Fatalf("check value %#x, want 0x6c40df5f0b497347", got)
	}
	// The reflected table of hash/crc64 is a different function.
	if crc64.Checksum([]byte("123456789"), crc64.MakeTable(crc64.ECMA)) == 0x6c40df5f0b497347 {
		t.Fatal("hash/crc64 unexpectedly agrees")
	}
	var c CRC64
	for _, part := range []string{"1234", "", "56789"} {
		c.Write([]byte(part))
	}
	if c.Sum64() != 0x6c40df5f0b497347 || !bytes.Equal(c.Sum(nil), []byte{0x6c, 0x40, 0xdf, 0x5f, 0x0b, 0x49, 0x73, 0x47}) {
		t.Fatalf("incremental %#x / %x", c.Sum64(), c.Sum(nil))
	}
	c.Reset()
	if c.Sum64() != 0 || c.Size() != 8 || c.BlockSize() != 1 {
		t.Fatal("reset or sizes")
	}
	// Java's Long.toHexString: lowercase, no leading zeros, unsigned bits.
	for v, want := range map[uint64]string{0: "0", 0xab: "ab", 0x6c40df5f0b497347: "6c40df5f0b497347", 1 << 63: "8000000000000000"} {
		if got := FormatChecksum(v); got != want {
			t.Errorf("FormatChecksum(%#x) = %q, want %q", v, got, want)
		}
	}
}

func writeStream(tb testing.TB, content []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	if err := WriteSnapshotStream(&buf, func(w io.Writer) error {
		_, err := w.Write(content)
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

func readStream(b []byte) ([]byte, ArchiveCheck, error) {
	var got []byte
	var check ArchiveCheck
	err := ReadSnapshotStream(bytes.NewReader(b), testMaxArchive, testMaxEntry, func(r io.Reader, c ArchiveCheck) error {
		check = c
		var err error
		got, err = io.ReadAll(r)
		return err
	})
	return got, check, err
}

func TestSnapshotStream(t *testing.T) {
	content := testContent(10_000)
	stream := writeStream(t, content)
	archive := stream[:len(stream)-streamRecordLen]
	if !bytes.Equal(archive, writeArchive(t, content, 1<<20)) {
		t.Fatal("the stream does not start with the plain archive")
	}
	got, check, err := readStream(stream)
	if err != nil || !bytes.Equal(got, content) {
		t.Fatalf("round trip: %v", err)
	}
	want := FormatChecksum(ChecksumCRC64(archive))
	if !check.Verified() || check.Recorded != want || check.Computed != want || check.Source != StreamRecord {
		t.Fatalf("check %+v, want recorded = computed = %s", check, want)
	}
	// A stream from before the record: readable, nothing recorded.
	got, check, err = readStream(archive)
	if err != nil || !bytes.Equal(got, content) || check.Verified() || check.Computed != want {
		t.Fatalf("legacy stream: %v %+v", err, check)
	}
}

func TestSnapshotStreamRejects(t *testing.T) {
	stream := writeStream(t, testContent(3000))
	n := len(stream)
	flipped := bytes.Clone(stream)
	flipped[n/2] ^= 1
	badSum := bytes.Clone(stream)
	badSum[n-1] ^= 1
	spliced := append(bytes.Clone(stream[:n-streamRecordLen]), 0)
	spliced = append(spliced, stream[n-streamRecordLen:]...)
	var mismatch *ChecksumError
	for name, tt := range map[string]struct {
		b     []byte
		check func(error) bool
	}{
		"archive byte flipped": {flipped, func(err error) bool { return errors.As(err, &mismatch) }},
		"checksum wrong":       {badSum, func(err error) bool { return errors.As(err, &mismatch) }},
		"extra byte":           {spliced, func(err error) bool { return errors.Is(err, ErrBadArchive) }},
		"truncated archive":    {append(bytes.Clone(stream[:n-streamRecordLen-10]), stream[n-streamRecordLen:]...), func(err error) bool { return errors.Is(err, ErrBadArchive) }},
	} {
		_, _, err := readStream(tt.b)
		if err == nil || !tt.check(err) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	_, _, err := readStream(badSum)
	want := "snapshot checksum mismatch: recorded " + FormatChecksum(ChecksumCRC64(stream[:n-streamRecordLen])^1) + ", computed " + FormatChecksum(ChecksumCRC64(stream[:n-streamRecordLen]))
	if err == nil || err.Error() != want {
		t.Fatalf("message %q, want %q", err, want)
	}
	// Cut anywhere: never accepted with the record intact, never a panic.
	for cut := range n {
		if _, check, err := readStream(stream[:cut]); err == nil && check.Verified() {
			t.Fatalf("cut at %d accepted as verified", cut)
		}
	}
}

func TestRaftMetaRoundTrip(t *testing.T) {
	m := RaftMeta{
		HasSnapshotMeta: true, LastIncludedIndex: 1 << 40, LastIncludedTerm: 7,
		Peers: []string{"10.0.0.1:7848", "10.0.0.2:7848"}, OldPeers: []string{"10.0.0.3:7848"},
		Learners: []string{"l1"}, OldLearners: []string{"l2"},
		Files: []RaftFile{
			{Name: ArchiveName, HasMeta: true, UserMeta: NacosUserMeta(0x6c40df5f0b497347)},
			{Name: "other", HasMeta: true, Source: 1, Checksum: "abc"},
			{Name: "bare"},
		},
	}
	b := EncodeRaftMeta(m)
	if !bytes.HasPrefix(b, []byte("\x00\x00\x00\x19jraft.LocalSnapshotPbMeta")) {
		t.Fatalf("header %q", b[:32])
	}
	got, err := DecodeRaftMeta(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(EncodeRaftMeta(got), b) {
		t.Fatalf("round trip changed the meta: %+v", got)
	}
	f, ok := got.File(ArchiveName)
	sum, recorded, err := NacosChecksum(f.UserMeta)
	if !ok || !recorded || err != nil || sum != "6c40df5f0b497347" {
		t.Fatalf("checksum %q %v %v", sum, recorded, err)
	}
	if string(f.UserMeta) != `{"fileMeta":{"checksum":"6c40df5f0b497347"}}` {
		t.Fatalf("user meta %s", f.UserMeta)
	}
	for name, bad := range map[string][]byte{
		"empty":         nil,
		"wrong message": append([]byte("\x00\x00\x00\x03abc"), b[29:]...),
		"truncated":     b[:len(b)-1],
		"trailing":      append(bytes.Clone(b), 0),
	} {
		if _, err := DecodeRaftMeta(bad); !errors.Is(err, ErrBadRaftMeta) {
			t.Errorf("%s: %v", name, err)
		}
	}
	for um, want := range map[string]bool{``: false, `{}`: false, `{"fileMeta":{}}`: false, `{"fileMeta":{"checksum":"1"}}`: true} {
		if _, ok, err := NacosChecksum([]byte(um)); ok != want || err != nil {
			t.Errorf("user meta %q: %v %v", um, ok, err)
		}
	}
	if _, _, err := NacosChecksum([]byte(`{"fileMeta":{"checksum":1}}`)); err == nil {
		t.Error("numeric checksum accepted")
	}
}

func readPath(path string) ([]byte, ArchiveCheck, error) {
	var got []byte
	check, err := ReadSnapshotPath(path, testMaxArchive, testMaxEntry, func(r io.Reader, _ ArchiveCheck) error {
		var err error
		got, err = io.ReadAll(r)
		return err
	})
	return got, check, err
}

func TestSnapshotDir(t *testing.T) {
	content := testContent(4000)
	dir := filepath.Join(t.TempDir(), "snap")
	sum, err := WriteSnapshotDir(dir, SnapshotDirMeta{LastIncludedIndex: 42, LastIncludedTerm: 3, Peers: []string{"127.0.0.1:7848"}}, func(w io.Writer) error {
		_, err := w.Write(content)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 2 || entries[0].Name() != RaftMetaName || entries[1].Name() != ArchiveName {
		t.Fatalf("directory holds %v", entries)
	}
	for _, p := range []string{dir, filepath.Join(dir, ArchiveName)} {
		got, check, err := readPath(p)
		if err != nil || !bytes.Equal(got, content) {
			t.Fatalf("%s: %v", p, err)
		}
		if !check.Verified() || check.Recorded != FormatChecksum(sum) || check.Source != RaftMetaName {
			t.Fatalf("%s: check %+v", p, check)
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, RaftMetaName))
	meta, err := DecodeRaftMeta(b)
	if err != nil || meta.LastIncludedIndex != 42 || meta.LastIncludedTerm != 3 || len(meta.Peers) != 1 || len(meta.Files) != 1 {
		t.Fatalf("meta %+v %v", meta, err)
	}
	if _, err := WriteSnapshotDir(dir, SnapshotDirMeta{}, func(io.Writer) error { return nil }); err == nil {
		t.Fatal("wrote over a non-empty directory")
	}

	// A wrong checksum is refused, and says which.
	bad := filepath.Join(t.TempDir(), "bad")
	os.Mkdir(bad, 0o755)
	os.WriteFile(filepath.Join(bad, ArchiveName), mustRead(t, filepath.Join(dir, ArchiveName)), 0o644)
	meta.Files[0].UserMeta = NacosUserMeta(sum + 1)
	os.WriteFile(filepath.Join(bad, RaftMetaName), EncodeRaftMeta(meta), 0o644)
	var mismatch *ChecksumError
	if _, _, err := readPath(bad); !errors.As(err, &mismatch) || mismatch.Recorded != FormatChecksum(sum+1) {
		t.Fatalf("wrong checksum: %v", err)
	}
	// No checksum in the user meta: accepted unverified, as Nacos does.
	meta.Files[0].UserMeta = nil
	os.WriteFile(filepath.Join(bad, RaftMetaName), EncodeRaftMeta(meta), 0o644)
	if _, check, err := readPath(bad); err != nil || check.Verified() {
		t.Fatalf("no recorded checksum: %v %+v", err, check)
	}
	// The meta must list the archive.
	meta.Files[0].Name = "other.zip"
	os.WriteFile(filepath.Join(bad, RaftMetaName), EncodeRaftMeta(meta), 0o644)
	if _, _, err := readPath(bad); !errors.Is(err, ErrBadRaftMeta) {
		t.Fatalf("meta without the archive: %v", err)
	}
	// A directory without __raft_snapshot_meta is not a snapshot.
	os.Remove(filepath.Join(bad, RaftMetaName))
	if _, _, err := readPath(bad); err == nil || !strings.Contains(err.Error(), "not a snapshot directory") {
		t.Fatalf("no meta: %v", err)
	}
	// The zip alone, without a meta beside it: unverified.
	if _, check, err := readPath(filepath.Join(bad, ArchiveName)); err != nil || check.Verified() {
		t.Fatalf("lone zip: %v %+v", err, check)
	}
	// A stream file is checked against its record.
	stream := filepath.Join(t.TempDir(), "snapshot.bin")
	os.WriteFile(stream, writeStream(t, content), 0o644)
	if got, check, err := readPath(stream); err != nil || !bytes.Equal(got, content) || check.Source != StreamRecord {
		t.Fatalf("stream file: %v %+v", err, check)
	}
}

func mustRead(tb testing.TB, p string) []byte {
	tb.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func FuzzReadSnapshotStream(f *testing.F) {
	f.Add(writeStream(f, testContent(300)))
	f.Add(writeArchive(f, testContent(100), 7))
	f.Add(zipOf(f, entry{"lock", []byte("x")}, entry{"extra", []byte("y")}))
	f.Add([]byte(streamRecordMagic))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, check, err := readStream(b)
		if err != nil {
			return
		}
		// Whatever is accepted must be a complete archive of one entry,
		// and the plain archive reader agrees about it.
		archive := b
		if check.Verified() {
			archive = b[:len(b)-streamRecordLen]
		}
		again, _, err := readArchive(archive, testMaxArchive, testMaxEntry)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("stream reader accepted what the archive reader refuses: %v", err)
		}
	})
}

func FuzzDecodeRaftMeta(f *testing.F) {
	f.Add(EncodeRaftMeta(RaftMeta{HasSnapshotMeta: true, LastIncludedIndex: 9, Peers: []string{"p"},
		Files: []RaftFile{{Name: ArchiveName, HasMeta: true, UserMeta: NacosUserMeta(1)}}}))
	for _, p := range []string{"gen1-concurrenthashmap", "gen2-hashmap"} {
		if b, err := os.ReadFile(filepath.Join("..", "compat", "testdata", "nacos", p, RaftMetaName)); err == nil {
			f.Add(b)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeRaftMeta(b)
		if err != nil {
			return
		}
		if _, err := DecodeRaftMeta(EncodeRaftMeta(m)); err != nil {
			t.Fatalf("re-encoded meta does not decode: %v", err)
		}
	})
}

// The fixtures under compat/testdata/nacos were written by JRaft's own
// LocalSnapshotMetaTable with Nacos's user meta, and their archives by
// Nacos's DiskUtils with JRaft's CRC64: our reader, writer and checksum
// agree with them byte for byte.
func TestSnapshotFilesMatchJRaftAndNacos(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("..", "compat", "testdata", "nacos", "*", RaftMetaName))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, metaPath := range dirs {
		dir := filepath.Dir(metaPath)
		raw := mustRead(t, metaPath)
		meta, err := DecodeRaftMeta(raw)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		archive := mustRead(t, filepath.Join(dir, ArchiveName))
		sum := ChecksumCRC64(archive)
		want := RaftMeta{HasSnapshotMeta: true, LastIncludedIndex: 42, LastIncludedTerm: 3, Peers: []string{"127.0.0.1:7848"},
			Files: []RaftFile{{Name: ArchiveName, HasMeta: true, UserMeta: NacosUserMeta(sum)}}}
		if !bytes.Equal(EncodeRaftMeta(want), raw) {
			t.Fatalf("%s: our encoding of the same meta differs from JRaft's:\n ours %x\njraft %x", dir, EncodeRaftMeta(want), raw)
		}
		if recorded, ok, err := NacosChecksum(meta.Files[0].UserMeta); !ok || err != nil || recorded != FormatChecksum(sum) {
			t.Fatalf("%s: recorded %q, computed %s", dir, recorded, FormatChecksum(sum))
		}
		// Java's zip: one streamed DEFLATE entry "lock" with a data
		// descriptor (flags 0x0808), which our reader takes as is.
		if archive[6] != 0x08 || archive[7] != 0x08 || archive[8] != 8 {
			t.Fatalf("%s: flags %#x%02x method %d", dir, archive[7], archive[6], archive[8])
		}
		if _, _, err := readPath(dir); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
	}
}
