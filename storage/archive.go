package storage

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

const (
	// ArchiveName is the file name Nacos gives its lock snapshot.
	ArchiveName = "nacos_lock.zip"
	// ArchiveEntry is the one entry of that zip, as Nacos writes it.
	ArchiveEntry = "lock"
)

// ErrBadArchive wraps every reason ReadArchive refuses its input other than
// size: not a zip, truncated, wrong entries, corrupt data.
var ErrBadArchive = errors.New("storage: bad snapshot archive")

// ErrArchiveTooLarge is returned when the archive or its entry exceeds the
// caller's limit.
var ErrArchiveTooLarge = errors.New("storage: snapshot archive too large")

// Fixed modification stamp, 1980-01-01 00:00:00, the earliest valid MS-DOS
// date. Java writes the current time; a fixed one makes the archive a pure
// function of its content.
const (
	archiveDOSDate = 1<<5 | 1 // (year-1980)<<9 | month<<5 | day
	archiveDOSTime = 0
)

// WriteArchive writes a zip with exactly one DEFLATE entry named "lock"
// holding what fill writes, laid out like Nacos's: streamed, so sizes and CRC
// follow the data in a descriptor, with the UTF-8 name flag that Java sets
// (general-purpose flags 0x0808).
//
// The output is deterministic: the same content bytes, however fill splits
// its writes, give the same archive bytes, because the timestamp is fixed
// and no extra fields are written. compress/flate's output is only promised
// stable within one Go release, so do not compare archives made by
// different builds. An error from fill is returned as is, and w is then left
// with a partial archive.
func WriteArchive(w io.Writer, fill func(io.Writer) error) error {
	zw := zip.NewWriter(w)
	ew, err := zw.CreateHeader(&zip.FileHeader{
		Name:   ArchiveEntry,
		Method: zip.Deflate,
		// Java sets the UTF-8 flag on every entry; Go would leave it off for
		// an ASCII name. The writer adds 0x8 (data descriptor) itself.
		Flags:        0x800,
		ModifiedDate: archiveDOSDate,
		ModifiedTime: archiveDOSTime,
	})
	if err != nil {
		return fmt.Errorf("create archive entry: %w", err)
	}
	if err := fill(ew); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("finish archive: %w", err)
	}
	return nil
}

// ReadArchive reads a snapshot archive from r and calls read with the
// content of its "lock" entry.
//
// Zip needs random access, so r is spooled to memory, at most maxArchive
// bytes: lock snapshots are small (a record per held lock), and memory
// avoids a temp-file location and its cleanup. Nacos's reader concatenates
// every entry, but its writer only ever makes one, so anything other than
// exactly one entry named "lock" is refused rather than guessed at.
//
// The entry is decompressed twice: first to check its CRC and that it
// inflates to at most maxEntry bytes (a zip bomb stops at the cap), then
// for read. So read only ever sees content known to be complete and
// intact, and can apply it as it goes. An error from read is returned
// wrapped.
func ReadArchive(r io.Reader, maxArchive, maxEntry int64, read func(io.Reader) error) error {
	if maxArchive <= 0 || maxEntry <= 0 {
		return fmt.Errorf("read archive: limits must be positive (archive %d, entry %d)", maxArchive, maxEntry)
	}
	buf, err := spool(r, maxArchive)
	if err != nil {
		return err
	}
	return readArchiveBytes(buf, maxEntry, read)
}

// spool reads r to memory, refusing more than limit bytes.
func spool(r io.Reader, limit int64) ([]byte, error) {
	buf, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read archive: %w", err)
	}
	if int64(len(buf)) > limit {
		return nil, fmt.Errorf("%w: archive exceeds %d bytes", ErrArchiveTooLarge, limit)
	}
	return buf, nil
}

// readArchiveBytes is ReadArchive on an archive already in memory.
func readArchiveBytes(buf []byte, maxEntry int64, read func(io.Reader) error) error {
	if maxEntry <= 0 {
		return fmt.Errorf("read archive: entry limit must be positive (%d)", maxEntry)
	}
	zr, err := zip.NewReader(bytes.NewReader(buf), int64(len(buf)))
	// ErrInsecurePath comes with a usable reader; the name check below
	// refuses such an entry anyway.
	if err != nil && !errors.Is(err, zip.ErrInsecurePath) {
		return fmt.Errorf("%w: not a complete zip archive (truncated or not a zip): %w", ErrBadArchive, err)
	}
	if len(zr.File) != 1 {
		names := make([]string, 0, len(zr.File))
		for _, f := range zr.File {
			names = append(names, strconv.Quote(f.Name))
		}
		return fmt.Errorf("%w: want exactly one entry %q, found %d entries [%s]", ErrBadArchive, ArchiveEntry, len(zr.File), strings.Join(names, " "))
	}
	f := zr.File[0]
	if f.Name != ArchiveEntry {
		return fmt.Errorf("%w: want entry %q, found %q", ErrBadArchive, ArchiveEntry, f.Name)
	}
	if f.UncompressedSize64 > uint64(maxEntry) {
		return fmt.Errorf("%w: entry declares %d bytes, limit %d", ErrArchiveTooLarge, f.UncompressedSize64, maxEntry)
	}
	// Pass 1: archive/zip checks the CRC at the end and refuses data longer
	// than the declared size; cappedReader enforces maxEntry regardless, so
	// the limit does not rest on that library detail.
	if err := openEntry(f, maxEntry, func(r io.Reader) error {
		_, err := io.Copy(io.Discard, r)
		return err
	}); err != nil {
		return err
	}
	// Pass 2: the caller's.
	return openEntry(f, maxEntry, func(r io.Reader) error {
		if err := read(r); err != nil {
			return fmt.Errorf("read archive entry: %w", err)
		}
		return nil
	})
}

func openEntry(f *zip.File, maxEntry int64, fn func(io.Reader) error) error {
	rc, err := f.Open()
	if err != nil {
		return fmt.Errorf("%w: open entry: %w", ErrBadArchive, err)
	}
	defer rc.Close()
	return fn(&cappedReader{r: rc, left: maxEntry})
}

// cappedReader fails once more than left bytes come out of r, and marks
// decompression failures as ErrBadArchive.
type cappedReader struct {
	r    io.Reader
	left int64
}

func (c *cappedReader) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, fmt.Errorf("%w: entry exceeds its limit", ErrArchiveTooLarge)
	}
	// Ask for one byte past the cap, so crossing it is seen.
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		// Hand over only the bytes within the cap.
		return n + int(c.left), fmt.Errorf("%w: entry exceeds its limit", ErrArchiveTooLarge)
	}
	if err != nil && !errors.Is(err, io.EOF) {
		err = fmt.Errorf("%w: %w", ErrBadArchive, err)
	}
	return n, err
}
