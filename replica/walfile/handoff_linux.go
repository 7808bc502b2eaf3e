package walfile

import (
	"syscall"
	"unsafe" // go:linkname, and pwriteHandingOff's buffer
)

// The runtime's own syscall entry and exit, as syscall.Syscall uses them,
// except that entersyscallblock hands the thread's P to other goroutines
// at once instead of leaving it for sysmon to retake. Both are kept
// linkable for gVisor, which blocks in syscalls the same way.
//
//go:linkname entersyscallblock runtime.entersyscallblock
func entersyscallblock()

//go:linkname exitsyscall runtime.exitsyscall
func exitsyscall()

// fdatasyncHandingOff is fdatasync with the P handed off for its
// duration. The three calls must share one frame, and nothing between
// them may grow the stack or call the race detector: hence nosplit and
// norace.
//
//go:nosplit
//go:norace
func fdatasyncHandingOff(fd uintptr) syscall.Errno {
	entersyscallblock()
	_, _, errno := syscall.RawSyscall6(syscall.SYS_FDATASYNC, fd, 0, 0, 0, 0, 0)
	exitsyscall()
	return errno
}

// pwriteHandingOff is pwrite with the P handed off for its duration (a
// direct, synchronous write waits for the device as fdatasync does).
//
//go:nosplit
//go:norace
func pwriteHandingOff(fd uintptr, b unsafe.Pointer, n uintptr, off int64) (int, syscall.Errno) {
	entersyscallblock()
	r, _, errno := syscall.RawSyscall6(syscall.SYS_PWRITE64, fd, uintptr(b), n, uintptr(off), 0, 0)
	exitsyscall()
	return int(r), errno
}
