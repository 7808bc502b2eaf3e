package h2grpc

import (
	"errors"
	"fmt"
	"io"
	"syscall"
)

// sockWriter is what a plain connection's frames are flushed to. Writes
// go to the socket and may wait for it, except while try is set
// (TryReply): then a write never waits (one system call that does not
// block, or none), and what the socket did not take is kept in spill,
// which goes out before anything written after it. Guarded by the
// connection's wmu, as every write is.
type sockWriter struct {
	w     io.Writer
	raw   syscall.RawConn
	try   bool
	spill []byte
}

func (s *sockWriter) Write(p []byte) (int, error) {
	if s.try {
		return s.tryWrite(p)
	}
	if len(s.spill) > 0 {
		if _, err := s.w.Write(s.spill); err != nil {
			return 0, err
		}
		s.spill = s.spill[:0]
	}
	if len(p) == 0 {
		return 0, nil
	}
	return s.w.Write(p)
}

// tryWrite takes all of p without waiting: what the socket refuses, and
// all of p while an earlier spill is still unsent (a message larger than
// the bufio writer above reaches here in several writes), is kept in
// spill.
func (s *sockWriter) tryWrite(p []byte) (int, error) {
	if len(s.spill) > 0 {
		n, err := s.writeNow(s.spill)
		if err != nil {
			return 0, err
		}
		s.spill = s.spill[:copy(s.spill, s.spill[n:])]
		if len(s.spill) > 0 {
			s.spill = append(s.spill, p...)
			return len(p), nil
		}
	}
	n, err := s.writeNow(p)
	if err != nil {
		return 0, err
	}
	s.spill = append(s.spill, p[n:]...)
	return len(p), nil
}

// writeNow is one write system call that does not wait: it returns how
// much of p the socket took, 0 if its buffer is full.
func (s *sockWriter) writeNow(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
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
	return max(n, 0), nil
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
