package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"nacos-lockd/internal/durable"
)

// ChecksumError is a snapshot archive whose CRC-64 differs from the one
// recorded beside it. Nothing is read from such an archive.
type ChecksumError struct {
	Recorded string // as recorded (Nacos's hex form)
	Computed string // FormatChecksum of the archive's CRC-64
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("snapshot checksum mismatch: recorded %s, computed %s", e.Recorded, e.Computed)
}

// ArchiveCheck reports how a snapshot archive's checksum was checked.
type ArchiveCheck struct {
	// Computed is the CRC-64/ECMA-182 of the whole archive file, as
	// FormatChecksum renders it.
	Computed string
	// Recorded is the checksum recorded beside the archive, equal to
	// Computed (a mismatch is a *ChecksumError instead); "" when nothing
	// was recorded, which Nacos accepts without a check.
	Recorded string
	// Source says where it was recorded: RaftMetaName or StreamRecord.
	Source string
}

// Verified reports whether a recorded checksum was compared and matched.
func (c ArchiveCheck) Verified() bool { return c.Recorded != "" }

// StreamRecord names the checksum record that follows the archive in a
// snapshot stream (see WriteSnapshotStream).
const StreamRecord = "stream checksum record"

// The stream checksum record: magic and record version, the archive's
// length, its CRC-64, all big-endian, 24 bytes after the zip.
const (
	streamRecordMagic = "NLCKSUM1"
	streamRecordLen   = len(streamRecordMagic) + 8 + 8
)

// WriteSnapshotStream writes a snapshot as it travels in a Raft snapshot
// stream: the archive (WriteArchive, fill writes the entry content),
// followed by a checksum record, so the receiver can check the archive as
// Nacos checks one against __raft_snapshot_meta:
//
//	"NLCKSUM1", uint64 archive length, uint64 CRC-64/ECMA-182 of the archive
//
// The zip reader ignores bytes after the archive's end record, so a
// reader that predates the record still reads the archive; ReadSnapshotStream
// reads streams with and without it. An error from fill is returned as is.
func WriteSnapshotStream(w io.Writer, fill func(io.Writer) error) error {
	var sum CRC64
	cw := &countingWriter{w: w, sum: &sum}
	if err := WriteArchive(cw, fill); err != nil {
		return err
	}
	rec := append([]byte(streamRecordMagic), make([]byte, 16)...)
	binary.BigEndian.PutUint64(rec[8:], uint64(cw.n))
	binary.BigEndian.PutUint64(rec[16:], sum.Sum64())
	if _, err := w.Write(rec); err != nil {
		return fmt.Errorf("write snapshot checksum: %w", err)
	}
	return nil
}

type countingWriter struct {
	w   io.Writer
	sum *CRC64
	n   int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	_, _ = c.sum.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// ReadSnapshotStream reads what WriteSnapshotStream wrote: it spools at
// most maxArchive bytes of archive, verifies the checksum record, and calls
// read with the content of the "lock" entry (see ReadArchive) and the
// outcome of the check. A stream that ends at the archive (as written before
// the record existed) has no recorded checksum; read decides whether that
// is acceptable for the content it finds. A mismatch is a *ChecksumError,
// and read is not called.
func ReadSnapshotStream(r io.Reader, maxArchive, maxEntry int64, read func(content io.Reader, check ArchiveCheck) error) error {
	if maxArchive <= 0 || maxEntry <= 0 {
		return fmt.Errorf("read snapshot: limits must be positive (archive %d, entry %d)", maxArchive, maxEntry)
	}
	buf, err := spool(r, maxArchive+int64(streamRecordLen))
	if err != nil {
		return err
	}
	archive, check, err := splitStreamRecord(buf)
	if err != nil {
		return err
	}
	if int64(len(archive)) > maxArchive {
		return fmt.Errorf("%w: archive exceeds %d bytes", ErrArchiveTooLarge, maxArchive)
	}
	return readArchiveBytes(archive, maxEntry, func(r io.Reader) error { return read(r, check) })
}

// splitStreamRecord separates the archive from a trailing checksum record
// and verifies it.
func splitStreamRecord(buf []byte) ([]byte, ArchiveCheck, error) {
	n := len(buf)
	if n < streamRecordLen || !bytes.Equal(buf[n-streamRecordLen:n-16], []byte(streamRecordMagic)) {
		return buf, ArchiveCheck{Computed: FormatChecksum(ChecksumCRC64(buf))}, nil
	}
	archive := buf[:n-streamRecordLen]
	length := binary.BigEndian.Uint64(buf[n-16:])
	if length != uint64(len(archive)) {
		return nil, ArchiveCheck{}, fmt.Errorf("%w: checksum record covers %d bytes but %d precede it (truncated or spliced stream)", ErrBadArchive, length, len(archive))
	}
	check := ArchiveCheck{
		Computed: FormatChecksum(ChecksumCRC64(archive)),
		Recorded: FormatChecksum(binary.BigEndian.Uint64(buf[n-8:])),
		Source:   StreamRecord,
	}
	if check.Recorded != check.Computed {
		return nil, ArchiveCheck{}, &ChecksumError{Recorded: check.Recorded, Computed: check.Computed}
	}
	return archive, check, nil
}

// SnapshotDirMeta is what WriteSnapshotDir records in __raft_snapshot_meta
// besides the archive's checksum.
type SnapshotDirMeta struct {
	LastIncludedIndex int64
	LastIncludedTerm  int64
	Peers             []string
}

// WriteSnapshotDir creates dir as a Nacos (JRaft) snapshot directory: the
// archive nacos_lock.zip (fill writes its entry content), and beside it
// __raft_snapshot_meta naming it, with Nacos's user meta carrying the
// archive's checksum. dir must not exist or be empty; the files are written
// to a temporary sibling directory, synced, and renamed into place, so dir
// never holds half a snapshot. It returns the archive's checksum.
func WriteSnapshotDir(dir string, meta SnapshotDirMeta, fill func(io.Writer) error) (uint64, error) {
	dir = filepath.Clean(dir)
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return 0, fmt.Errorf("write snapshot: %s exists and is not empty", dir)
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("write snapshot: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return 0, fmt.Errorf("write snapshot: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	var sum CRC64
	if err := writeFileSynced(filepath.Join(tmp, ArchiveName), func(w io.Writer) error {
		return WriteArchive(io.MultiWriter(w, &sum), fill)
	}); err != nil {
		return 0, err
	}
	rm := RaftMeta{
		HasSnapshotMeta:   true,
		LastIncludedIndex: meta.LastIncludedIndex,
		LastIncludedTerm:  meta.LastIncludedTerm,
		Peers:             meta.Peers,
		Files:             []RaftFile{{Name: ArchiveName, HasMeta: true, UserMeta: NacosUserMeta(sum.Sum64())}},
	}
	if err := writeFileSynced(filepath.Join(tmp, RaftMetaName), func(w io.Writer) error {
		_, err := w.Write(EncodeRaftMeta(rm))
		return err
	}); err != nil {
		return 0, err
	}
	if err := durable.SyncDir(tmp); err != nil {
		return 0, fmt.Errorf("write snapshot: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return 0, fmt.Errorf("write snapshot: %w", err)
	}
	if err := durable.SyncDir(filepath.Dir(dir)); err != nil {
		return 0, fmt.Errorf("write snapshot: %w", err)
	}
	return sum.Sum64(), nil
}

func writeFileSynced(path string, fill func(io.Writer) error) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return fmt.Errorf("write snapshot: %w", err)
	}
	err = fill(f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write snapshot %s: %w", filepath.Base(path), err)
	}
	return nil
}

// ReadSnapshotPath reads a snapshot archive from disk and calls read with
// the content of its "lock" entry, after checking the archive's checksum.
// path is one of:
//
//   - a snapshot directory, as Nacos (JRaft) and WriteSnapshotDir write
//     them: nacos_lock.zip checked against the checksum Nacos records for it
//     in __raft_snapshot_meta (which must be there and list it);
//   - a file named nacos_lock.zip: checked the same way when
//     __raft_snapshot_meta is beside it, otherwise nothing is recorded;
//   - any other archive file: checked against a stream checksum record if
//     one follows the archive (WriteSnapshotStream), otherwise nothing is
//     recorded.
//
// Like Nacos, a recorded checksum must match (else *ChecksumError, and read
// is not called) and a missing one skips the check; the returned
// ArchiveCheck says which happened.
func ReadSnapshotPath(path string, maxArchive, maxEntry int64, read func(content io.Reader, check ArchiveCheck) error) (ArchiveCheck, error) {
	if maxArchive <= 0 || maxEntry <= 0 {
		return ArchiveCheck{}, fmt.Errorf("read snapshot: limits must be positive (archive %d, entry %d)", maxArchive, maxEntry)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return ArchiveCheck{}, fmt.Errorf("read snapshot: %w", err)
	}
	zipPath, metaPath := path, ""
	if fi.IsDir() {
		zipPath, metaPath = filepath.Join(path, ArchiveName), filepath.Join(path, RaftMetaName)
		if _, err := os.Stat(metaPath); err != nil {
			return ArchiveCheck{}, fmt.Errorf("read snapshot: %s is not a snapshot directory: %w", path, err)
		}
	} else if filepath.Base(path) == ArchiveName {
		beside := filepath.Join(filepath.Dir(path), RaftMetaName)
		if _, err := os.Stat(beside); err == nil {
			metaPath = beside
		}
	}
	var recorded string
	var haveRecord bool
	if metaPath != "" {
		b, err := readFileLimited(metaPath, maxRaftMeta)
		if err != nil {
			return ArchiveCheck{}, err
		}
		meta, err := DecodeRaftMeta(b)
		if err != nil {
			return ArchiveCheck{}, fmt.Errorf("read snapshot: %w", err)
		}
		f, ok := meta.File(ArchiveName)
		if !ok {
			return ArchiveCheck{}, fmt.Errorf("read snapshot: %w: it does not list %s", ErrBadRaftMeta, ArchiveName)
		}
		if recorded, haveRecord, err = NacosChecksum(f.UserMeta); err != nil {
			return ArchiveCheck{}, fmt.Errorf("read snapshot: %w", err)
		}
	}
	buf, err := readFileLimited(zipPath, maxArchive+int64(streamRecordLen))
	if err != nil {
		return ArchiveCheck{}, err
	}
	var check ArchiveCheck
	archive := buf
	if metaPath != "" {
		check.Computed = FormatChecksum(ChecksumCRC64(buf))
		if haveRecord {
			if recorded != check.Computed {
				return ArchiveCheck{}, &ChecksumError{Recorded: recorded, Computed: check.Computed}
			}
			check.Recorded, check.Source = recorded, RaftMetaName
		}
	} else if archive, check, err = splitStreamRecord(buf); err != nil {
		return ArchiveCheck{}, err
	}
	if int64(len(archive)) > maxArchive {
		return ArchiveCheck{}, fmt.Errorf("%w: archive exceeds %d bytes", ErrArchiveTooLarge, maxArchive)
	}
	err = readArchiveBytes(archive, maxEntry, func(r io.Reader) error { return read(r, check) })
	if err != nil {
		return ArchiveCheck{}, err
	}
	return check, nil
}

func readFileLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read snapshot: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read snapshot %s: %w", filepath.Base(path), err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%w: %s exceeds %d bytes", ErrArchiveTooLarge, path, limit)
	}
	return b, nil
}
