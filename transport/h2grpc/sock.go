package h2grpc

import (
	"errors"
	"fmt"
	"io"
	"syscall"
)

// sockWriter is what a plain connection's frames are flushed to. Writes
// go to the socket and may wait for it, except while try is set
// (TryReply): then a write is one system call that does not wait, and
// what the socket did not take is kept in spill, which goes out before
// anything written after it. Guarded by the connection's wmu, as every
// write is.
type sockWriter struct {
	w     io.Writer
	raw   syscall.RawConn
	try   bool
	spill []byte
}

func (s *sockWriter) Write(p []byte) (int, error) {
	if len(s.spill) > 0 {
		if _, err := s.w.Write(s.spill); err != nil {
			return 0, err
		}
		s.spill = s.spill[:0]
	}
	if len(p) == 0 {
		return 0, nil
	}
	if !s.try {
		return s.w.Write(p)
	}
	n, werr := 0, error(nil)
	err := s.raw.Write(func(fd uintptr) bool {
		// Go's sockets are non-blocking: one attempt, then done.
		n, werr = syscall.Write(int(fd), p)
		return true
	})
	if err != nil {
		return 0, fmt.Errorf("write: %w", err)
	}
	if werr != nil && !errors.Is(werr, syscall.EAGAIN) && !errors.Is(werr, syscall.EINTR) {
		return 0, fmt.Errorf("write: %w", werr)
	}
	n = max(n, 0)
	s.spill = append(s.spill, p[n:]...)
	return len(p), nil
}

// sendSpill writes what a TryReply left for the socket, waiting for it as
// any writer does.
func (c *conn) sendSpill() {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if len(c.sock.spill) == 0 || c.wclosed {
		return
	}
	if _, err := c.sock.Write(nil); err != nil {
		c.log.Debug().Err(err).Msg("write the rest of a response written without waiting")
	}
}
