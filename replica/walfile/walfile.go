// Package walfile keeps the Raft log's write-ahead files written ahead of
// their writer, so that the sync after each Raft entry flushes the entry's
// data and nothing else.
//
// dragonboat keeps its log in pebble, and pebble appends each write-ahead
// file (NNNNNN.log) as it goes. An append moves the end of the file, so
// every fdatasync after it must also write the file's new size to disk:
// two writes and a flush for every Raft entry. On this project's test
// machines a synced 512-byte append cost 214-237 µs (p50) against 165-174
// µs for the same write into a file already written that far, and 20% more
// CPU. A single node syncs once per entry, so that difference is on the
// path of every lock command (W1 c=1: 0.87x p50; W2 c=16: 1.08x hand-offs/s).
//
// Install replaces pebble's default file system with one whose
// write-ahead files are padded with zeros a chunk ahead of the writer,
// and synced once when padded, as ZooKeeper pads its transaction log. The
// next chunk is padded in the background when the writer is half-way
// through the current one, so the writer waits only if it outruns that.
// pebble reads a zeroed chunk at the end of the last log as its end (its
// own preallocation and recycled logs leave the same tails), and every
// log it closes ends with an EOF trailer, so the zeros are never replayed.
// Other files (tables, manifests) are pebble's own.
//
// A sync blocks its thread for the device's flush (~150-250 µs here) while
// holding the thread's P: the runtime lends the P to other goroutines only
// when sysmon notices the syscall, which with nacos-lockd's timer slack
// (internal/timerslack) is usually after the sync has ended. When FS.Busy
// says the server has other work, the sync hands its P off as it starts
// (handoff_linux.go), so requests are read and answered during the flush;
// when it has none, handing off would only add a thread switch.
//
// dragonboat refuses a file system of its own choosing for its pebble log
// (only the test file systems are allowed through its configuration), so
// the hook is pebble's package-level default, which dragonboat's pebble
// opens its log through: Install must run before the log is opened, and
// it affects every pebble database of the process (nacos-lockd has one).
package walfile

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"syscall"

	"github.com/cockroachdb/pebble/vfs"
)

// Chunk is how far ahead of the writer a write-ahead file is padded, and
// how much is padded at a time.
const Chunk = 1 << 20

var installOnce sync.Once

// Install pads the write-ahead files of every pebble database opened from
// now on in this process, with busy as their FS.Busy. Only the first call
// has an effect.
func Install(busy func() bool) {
	installOnce.Do(func() { vfs.Default = FS{FS: vfs.Default, Busy: busy} })
}

// FS is a pebble file system that pads the write-ahead files it creates
// or reuses and leaves every other file as its inner FS makes it.
type FS struct {
	vfs.FS
	// Busy, if set, is asked before each sync of a write-ahead file:
	// true hands the syncing thread's P to other goroutines for the sync.
	Busy func() bool
}

// Create creates name; a write-ahead file is padded as it is written.
func (fs FS) Create(name string) (vfs.File, error) {
	f, err := fs.FS.Create(name)
	return fs.wrap(name, f, err)
}

// ReuseForWrite renames a recycled log to newname for writing from its
// start; its old contents count as padding.
func (fs FS) ReuseForWrite(oldname, newname string) (vfs.File, error) {
	f, err := fs.FS.ReuseForWrite(oldname, newname)
	return fs.wrap(newname, f, err)
}

// isLog reports whether pebble uses name as a write-ahead file.
func isLog(name string) bool { return strings.HasSuffix(name, ".log") }

func (fs FS) wrap(name string, f vfs.File, err error) (vfs.File, error) {
	if err != nil || !isLog(name) {
		return f, err
	}
	of, ok := f.(*os.File)
	if !ok {
		return f, nil // a test file system: nothing to sync
	}
	st, err := of.Stat()
	if err != nil {
		of.Close()
		return nil, fmt.Errorf("stat write-ahead file %s: %w", name, err)
	}
	return &paddedFile{File: of, f: of, writeAt: of.WriteAt, busy: fs.Busy, padded: st.Size()}, nil
}

// paddedFile is a write-ahead file written sequentially from offset 0 by
// one writer. It deliberately has no Fd method: pebble then syncs it
// through Sync (fdatasync, as pebble does for a file with one) and does not
// preallocate it, which the padding replaces.
type paddedFile struct {
	vfs.File // the *os.File: reads, Stat, Close
	f        *os.File
	writeAt  func([]byte, int64) (int, error) // pads; a test makes it fail
	busy     func() bool                      // FS.Busy

	off int64 // the writer's offset; only Write touches it

	mu      sync.Mutex
	padded  int64         // bytes from 0 written, by the writer or as padding
	padding chan struct{} // closed when the background pad ends; nil if none runs
	padErr  error         // the last pad's error, until a pad succeeds
	// noPadUntil: after a failed pad, writes ending before it append
	// without padding.
	noPadUntil int64
}

var zeros = make([]byte, Chunk)

func (p *paddedFile) Write(b []byte) (int, error) {
	end := p.off + int64(len(b))
	p.mu.Lock()
	for end > p.padded && end > p.noPadUntil {
		if wait := p.padding; wait != nil {
			p.mu.Unlock()
			<-wait
			p.mu.Lock()
			continue
		}
		// The writer outran the padding (the first write, a write larger
		// than a chunk, or a failed background pad): pad here; the data's
		// sync makes it durable.
		from := max(p.padded, p.off) // past what was appended unpadded
		n := (end - from + Chunk - 1) / Chunk * Chunk
		if err := p.pad(from, n); err != nil {
			// Padding is only an optimisation: never fail the log for
			// it (a full disk may still hold the entry). Append, and try
			// again a chunk later.
			p.padErr = err
			p.noPadUntil = end + Chunk
			break
		}
		p.padded = from + n
		p.padErr = nil
	}
	if p.padding == nil && p.padErr == nil && end > p.padded-Chunk/2 {
		p.padAhead()
	}
	p.mu.Unlock()
	n, err := p.f.Write(b)
	p.off += int64(n)
	return n, err
}

// padAhead pads and syncs the next chunk in the background; p.mu is held.
func (p *paddedFile) padAhead() {
	from := p.padded
	done := make(chan struct{})
	p.padding = done
	go func() {
		err := p.pad(from, Chunk)
		if err == nil {
			err = p.Sync()
		}
		p.mu.Lock()
		if err == nil {
			p.padded = from + Chunk
		}
		p.padErr = err
		p.padding = nil
		p.mu.Unlock()
		close(done)
	}()
}

// pad writes n zero bytes at from, beyond anything the writer has written.
func (p *paddedFile) pad(from, n int64) error {
	for n > 0 {
		k := min(n, Chunk)
		if _, err := p.writeAt(zeros[:k], from); err != nil {
			return fmt.Errorf("pad write-ahead file: %w", err)
		}
		from += k
		n -= k
	}
	return nil
}

// Sync flushes the file's data with fdatasync, as pebble would, handing
// the P off for it when the server is busy (see the package comment).
func (p *paddedFile) Sync() error {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return err
	}
	handOff := p.busy != nil && p.busy()
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if handOff {
				if errno := fdatasyncHandingOff(fd); errno != 0 {
					serr = errno
				} else {
					serr = nil
				}
			} else {
				serr = syscall.Fdatasync(int(fd))
			}
			if serr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: p.f.Name(), Err: serr}
	}
	return nil
}

// Close waits for a background pad, then closes the file.
func (p *paddedFile) Close() error {
	p.mu.Lock()
	wait := p.padding
	p.mu.Unlock()
	if wait != nil {
		<-wait
	}
	return p.f.Close()
}
