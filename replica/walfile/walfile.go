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
// Where the file system allows it, the writer's data does not go through
// the page cache: each Sync writes the data written since the last one,
// with the rest of its last block, in one write to a second descriptor
// of the file opened with O_DIRECT|O_DSYNC, which returns once the device
// has it (a flush of its cache included). Into a file already written
// that far, that is a write and a flush and nothing else, where a write
// into the page cache and fdatasync also went through the page's dirty
// state and writeback: back to back on this project's test machines
// (ext4 on a virtual disk), p50 199 µs against 274 µs and 69 µs of CPU
// against 105 (blocks of 150 synced 512-byte writes, interleaved); in
// the server (ab, pinned, 8-10 rounds against the page cache's way): W1
// c=1 1.03x pairs/s at 0.93x CPU per pair, W2 c=16 1.03x hand-offs/s at
// 0.93x CPU, W1 at 1500 pairs/s 0.98x CPU. The last, partial block
// stays in memory and is written again, with what follows it, by the next
// Sync; the padding is written the same way, in whole blocks, so no part
// of the file is ever written both through the page cache and around it.
// A file system that refuses O_DIRECT (tmpfs) gets the page cache and
// fdatasync, as does a file whose first direct write fails.
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
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"unsafe"

	"github.com/cockroachdb/pebble/vfs"
)

// Chunk is how far ahead of the writer a write-ahead file is padded, and
// how much is padded at a time.
const Chunk = 1 << 20

// block is the unit of direct I/O: offsets, lengths and buffers of
// O_DIRECT writes must be multiples of the device's logical block size,
// 512 or 4096 bytes on the devices we know.
const block = 4096

// maxTail bounds the data a direct file holds in memory between syncs:
// past it, Write writes the whole blocks out (durably, as every direct
// write is). pebble syncs dragonboat's entries one write at a time, so
// this is only for writes nobody syncs.
const maxTail = 1 << 20

var installOnce sync.Once

// disk is pebble's own file system, kept before Install replaces the
// package default.
var disk = vfs.Default

// Create creates the write-ahead file name (it must end in ".log"),
// padded and written as Install's files are, with busy as its FS.Busy:
// for a log that is not pebble's.
func Create(name string, busy func() bool) (vfs.File, error) {
	if !isLog(name) {
		return nil, fmt.Errorf("walfile: %s is not named as a write-ahead file (*.log)", name)
	}
	return FS{FS: disk, Busy: busy}.Create(name)
}

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
	// buffered writes the logs through the page cache even where direct
	// I/O is allowed (the tests of that path).
	buffered bool
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
	p := &paddedFile{File: of, f: of, writeAt: of.WriteAt, busy: fs.Busy, padded: st.Size()}
	if !fs.buffered {
		p.openDirect()
	}
	return p, nil
}

// paddedFile is a write-ahead file written sequentially from offset 0 by
// one writer. It deliberately has no Fd method: pebble then syncs it
// through Sync (fdatasync, as pebble does for a file with one) and does not
// preallocate it, which the padding replaces. Reads through it see what
// has been synced (pebble reads a log only when it opens a database).
type paddedFile struct {
	vfs.File // the *os.File: reads, Stat, Close
	f        *os.File
	busy     func() bool // FS.Busy

	off int64 // the writer's offset; only the writer touches it

	// direct is the file opened again with O_DIRECT|O_DSYNC, nil when the
	// file is written through the page cache. Then tail[:tailLen] are the
	// file's bytes from tailOff (a block boundary) up to the writer's
	// offset: not yet written (dirty), or kept to be written again with
	// what follows them. tail is zero past tailLen. Only the writer (Write,
	// Sync and Close, which pebble calls one at a time) touches these.
	direct  *os.File
	tail    []byte
	tailOff int64
	tailLen int
	dirty   bool

	mu      sync.Mutex
	writeAt func([]byte, int64) (int, error) // pads; a test makes it fail
	padded  int64                            // bytes from 0 written, by the writer or as padding
	padding chan struct{}                    // closed when the background pad ends; nil if none runs
	padErr  error                            // the last pad's error, until a pad succeeds
	// noPadUntil: after a failed pad, writes ending before it append
	// without padding.
	noPadUntil int64
}

// openDirect opens the file a second time for direct, synchronous writes,
// and leaves it buffered if the file system refuses.
func (p *paddedFile) openDirect() {
	d, err := os.OpenFile(p.f.Name(), os.O_WRONLY|syscall.O_DIRECT|syscall.O_DSYNC, 0)
	if err != nil {
		return
	}
	p.direct = d
	p.writeAt = d.WriteAt
	p.tail = alignedBuf(2 * block)
	// Padding starts at a block boundary: the block that holds the
	// writer's end is the tail's to write, whole.
	p.padded = roundUp(p.padded)
}

func roundUp(n int64) int64 { return (n + block - 1) &^ (block - 1) }

// alignedBuf returns n zero bytes starting at a block boundary in memory,
// as O_DIRECT needs.
func alignedBuf(n int) []byte {
	b := make([]byte, n+block)
	skip := int(-uintptr(unsafe.Pointer(&b[0])) & (block - 1))
	return b[skip : skip+n : skip+n]
}

var zeros = alignedBuf(Chunk) // aligned for direct writes

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
		if p.direct != nil {
			from = roundUp(from) // the tail's block is the tail's to write
		}
		n := (end - from + Chunk - 1) / Chunk * Chunk
		if err := pad(p.writeAt, from, n); err != nil {
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
	if p.direct != nil {
		return p.appendTail(b)
	}
	n, err := p.f.Write(b)
	p.off += int64(n)
	return n, err
}

// appendTail takes b into the tail, for the next Sync to write.
func (p *paddedFile) appendTail(b []byte) (int, error) {
	if need := p.tailLen + len(b); need > len(p.tail) {
		grown := alignedBuf(int(roundUp(int64(max(need, 2*len(p.tail))))))
		copy(grown, p.tail[:p.tailLen])
		p.tail = grown
	}
	copy(p.tail[p.tailLen:], b)
	p.tailLen += len(b)
	p.off += int64(len(b))
	p.dirty = true
	if p.tailLen >= maxTail {
		if err := p.writeTail(false); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}

// writeTail writes the tail out, rounded up to whole blocks, and keeps
// only its last partial block. The write is synchronous (O_DSYNC): once
// it returns, the data is on the device.
func (p *paddedFile) writeTail(handOff bool) error {
	n := int(roundUp(int64(p.tailLen)))
	for done := 0; done < n; {
		k, errno := pwrite(p.direct, p.tail[done:n], p.tailOff+int64(done), handOff)
		if errno == syscall.EINTR {
			continue
		}
		if errno != 0 {
			if done == 0 && errno == syscall.EINVAL {
				// The file system took O_DIRECT at open but refuses the
				// write (a block size above ours): go on buffered.
				return p.leaveDirect()
			}
			return &os.PathError{Op: "write", Path: p.f.Name(), Err: errno}
		}
		done += k
	}
	full := p.tailLen &^ (block - 1)
	rest := p.tailLen - full
	copy(p.tail, p.tail[full:p.tailLen])
	clear(p.tail[rest:p.tailLen])
	p.tailOff += int64(full)
	p.tailLen = rest
	p.dirty = false
	return nil
}

// pwrite writes b at off through the direct descriptor, handing the P
// off for it if asked (see Sync).
func pwrite(f *os.File, b []byte, off int64, handOff bool) (int, syscall.Errno) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, syscall.EBADF
	}
	var n int
	var errno syscall.Errno
	if err := rc.Control(func(fd uintptr) {
		if handOff {
			n, errno = pwriteHandingOff(fd, unsafe.Pointer(&b[0]), uintptr(len(b)), off)
			return
		}
		r, _, e := syscall.Syscall6(syscall.SYS_PWRITE64, fd, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(off), 0, 0)
		n, errno = int(r), e
	}); err != nil {
		return 0, syscall.EBADF
	}
	return n, errno
}

// leaveDirect writes what the tail holds through the page cache, syncs
// it, and writes the file that way from now on.
func (p *paddedFile) leaveDirect() error {
	p.mu.Lock()
	wait := p.padding
	p.mu.Unlock()
	if wait != nil {
		<-wait // the padder writes through the direct descriptor
	}
	p.mu.Lock()
	p.writeAt = p.f.WriteAt
	p.mu.Unlock()
	p.direct.Close()
	p.direct = nil
	if _, err := p.f.WriteAt(p.tail[:p.tailLen], p.tailOff); err != nil {
		return fmt.Errorf("write-ahead file %s: %w", p.f.Name(), err)
	}
	if _, err := p.f.Seek(p.off, io.SeekStart); err != nil {
		return fmt.Errorf("write-ahead file %s: %w", p.f.Name(), err)
	}
	p.tail, p.tailLen, p.dirty = nil, 0, false
	return p.fdatasync(false)
}

// padAhead pads and syncs the next chunk in the background; p.mu is held.
func (p *paddedFile) padAhead() {
	from := p.padded
	done := make(chan struct{})
	p.padding = done
	direct, writeAt := p.direct != nil, p.writeAt
	go func() {
		err := pad(writeAt, from, Chunk)
		if err == nil && !direct { // a direct write is synchronous
			err = p.fdatasync(false)
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

// pad writes n zero bytes at from, beyond anything the writer has
// written, with writeAt (p.writeAt, read under p.mu).
func pad(writeAt func([]byte, int64) (int, error), from, n int64) error {
	for n > 0 {
		k := min(n, Chunk)
		if _, err := writeAt(zeros[:k], from); err != nil {
			return fmt.Errorf("pad write-ahead file: %w", err)
		}
		from += k
		n -= k
	}
	return nil
}

// Sync makes what was written durable: one direct write of the tail, or
// fdatasync as pebble would, handing the P off for it when the server is
// busy (see the package comment).
func (p *paddedFile) Sync() error {
	handOff := p.busy != nil && p.busy()
	if p.direct != nil {
		if !p.dirty {
			return nil // everything written is on the device
		}
		return p.writeTail(handOff)
	}
	return p.fdatasync(handOff)
}

func (p *paddedFile) fdatasync(handOff bool) error {
	rc, err := p.f.SyscallConn()
	if err != nil {
		return err
	}
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

// Close waits for a background pad, writes what the tail holds, then
// closes the file.
func (p *paddedFile) Close() error {
	p.mu.Lock()
	wait := p.padding
	p.mu.Unlock()
	if wait != nil {
		<-wait
	}
	var err error
	if p.direct != nil {
		if p.dirty {
			err = p.writeTail(false)
		}
		if p.direct != nil {
			if cerr := p.direct.Close(); err == nil {
				err = cerr
			}
		}
	}
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// IsDirect reports whether f is a write-ahead file written with direct
// I/O (see the package comment).
func IsDirect(f vfs.File) bool {
	p, ok := f.(*paddedFile)
	return ok && p.direct != nil
}
