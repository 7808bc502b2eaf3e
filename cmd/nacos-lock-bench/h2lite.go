package main

// A lean gRPC-over-HTTP/2 server for unary calls, to measure what the wire
// costs without grpc-go's server transport (issue: is replacing the
// transport worth it?). It is a measuring instrument, not a server: it
// speaks enough HTTP/2 for grpc-go's client (preface, SETTINGS, PING,
// WINDOW_UPDATE, HEADERS, DATA, RST_STREAM, GOAWAY) and answers every
// unary call with one handler. Per connection one goroutine reads frames;
// each complete request runs its handler on a goroutine of its own (as a
// lock request that waits for Raft must), which writes its response
// frames under the connection's write lock and flushes them itself, so a
// response costs one write syscall and no hand-off to a writer goroutine.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// h2Handler answers one unary request message (without the gRPC length
// prefix) with a response message.
type h2Handler func(req []byte) ([]byte, error)

func serveH2Lite(lis net.Listener, h h2Handler) error {
	for {
		c, err := lis.Accept()
		if err != nil {
			return err
		}
		go func() {
			if err := serveH2Conn(c, h); err != nil && !errors.Is(err, io.EOF) {
				fmt.Println("h2lite:", err)
			}
			c.Close()
		}()
	}
}

type h2Conn struct {
	c net.Conn
	h h2Handler

	wmu      sync.Mutex
	bw       *bufio.Writer
	fr       *http2.Framer // writes under wmu; reads only on the read loop
	henc     *hpack.Encoder
	hbuf     bytes.Buffer
	sendWin  int64            // connection-level window the peer gave us
	strWin   map[uint32]int64 // per-stream windows, for streams with a response to send
	initWin  int64            // the peer's SETTINGS_INITIAL_WINDOW_SIZE
	winCond  *sync.Cond
	closed   bool
	streams  map[uint32]*bytes.Buffer
	unacked  uint32 // received DATA bytes not yet returned with WINDOW_UPDATE
	maxFrame uint32
}

func serveH2Conn(c net.Conn, h h2Handler) error {
	br := bufio.NewReaderSize(c, 32<<10)
	pre := make([]byte, len(h2Preface))
	if _, err := io.ReadFull(br, pre); err != nil || string(pre) != h2Preface {
		return fmt.Errorf("bad preface: %w", err)
	}
	hc := &h2Conn{c: c, h: h, bw: bufio.NewWriterSize(c, 32<<10), sendWin: 65535, initWin: 65535, strWin: map[uint32]int64{}, streams: map[uint32]*bytes.Buffer{}, maxFrame: 16384}
	hc.winCond = sync.NewCond(&hc.wmu)
	hc.fr = http2.NewFramer(hc.bw, br)
	hc.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	hc.henc = hpack.NewEncoder(&hc.hbuf)
	hc.wmu.Lock()
	err := hc.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 1000})
	if err == nil {
		err = hc.bw.Flush()
	}
	hc.wmu.Unlock()
	if err != nil {
		return err
	}
	defer func() {
		hc.wmu.Lock()
		hc.closed = true
		hc.winCond.Broadcast()
		hc.wmu.Unlock()
	}()
	for {
		f, err := hc.fr.ReadFrame()
		if err != nil {
			return err
		}
		if err := hc.onFrame(f); err != nil {
			return err
		}
		// Control frames queued by onFrame go out once nothing more is
		// buffered to read, so a burst of frames costs one write.
		if br.Buffered() == 0 {
			hc.wmu.Lock()
			if hc.bw.Buffered() > 0 {
				err = hc.bw.Flush()
			}
			hc.wmu.Unlock()
			if err != nil {
				return err
			}
		}
	}
}

func (hc *h2Conn) onFrame(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if f.IsAck() {
			return nil
		}
		hc.wmu.Lock()
		defer hc.wmu.Unlock()
		if v, ok := f.Value(http2.SettingMaxFrameSize); ok {
			hc.maxFrame = v
		}
		if v, ok := f.Value(http2.SettingInitialWindowSize); ok {
			for id := range hc.strWin {
				hc.strWin[id] += int64(v) - hc.initWin
			}
			hc.initWin = int64(v)
			hc.winCond.Broadcast()
		}
		return hc.fr.WriteSettingsAck()
	case *http2.PingFrame:
		if f.IsAck() {
			return nil
		}
		hc.wmu.Lock()
		defer hc.wmu.Unlock()
		return hc.fr.WritePing(true, f.Data)
	case *http2.WindowUpdateFrame:
		hc.wmu.Lock()
		if f.StreamID == 0 {
			hc.sendWin += int64(f.Increment)
		} else if _, ok := hc.strWin[f.StreamID]; ok {
			hc.strWin[f.StreamID] += int64(f.Increment)
		}
		hc.winCond.Broadcast()
		hc.wmu.Unlock()
		return nil
	case *http2.MetaHeadersFrame:
		hc.streams[f.StreamID] = new(bytes.Buffer)
		if f.StreamEnded() {
			return hc.endStream(f.StreamID)
		}
		return nil
	case *http2.DataFrame:
		b := hc.streams[f.StreamID]
		if b != nil {
			b.Write(f.Data())
		}
		if n := uint32(len(f.Data())); n > 0 {
			hc.unacked += n
			if hc.unacked >= 16<<10 {
				hc.wmu.Lock()
				err := hc.fr.WriteWindowUpdate(0, hc.unacked)
				hc.wmu.Unlock()
				hc.unacked = 0
				if err != nil {
					return err
				}
			}
		}
		if f.StreamEnded() {
			return hc.endStream(f.StreamID)
		}
		return nil
	case *http2.RSTStreamFrame:
		delete(hc.streams, f.StreamID)
		return nil
	case *http2.GoAwayFrame:
		return io.EOF
	}
	return nil
}

func (hc *h2Conn) endStream(id uint32) error {
	b := hc.streams[id]
	delete(hc.streams, id)
	if b == nil {
		return nil
	}
	msg := b.Bytes()
	if len(msg) < 5 || int(binary.BigEndian.Uint32(msg[1:5])) != len(msg)-5 {
		return hc.respond(id, nil, "13", "malformed gRPC message")
	}
	hc.wmu.Lock()
	hc.strWin[id] = hc.initWin
	hc.wmu.Unlock()
	go func() {
		out, err := hc.h(msg[5:])
		if err != nil {
			_ = hc.respond(id, nil, "13", err.Error())
			return
		}
		_ = hc.respond(id, out, "0", "")
	}()
	return nil
}

// respond writes a whole unary response (headers, message, trailers) and
// flushes it.
func (hc *h2Conn) respond(id uint32, msg []byte, status, text string) error {
	hc.wmu.Lock()
	defer hc.wmu.Unlock()
	defer delete(hc.strWin, id)
	if hc.closed {
		return io.EOF
	}
	hc.hbuf.Reset()
	hc.henc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
	hc.henc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	if err := hc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hc.hbuf.Bytes(), EndHeaders: true}); err != nil {
		return err
	}
	if msg != nil {
		var pre [5]byte
		binary.BigEndian.PutUint32(pre[1:], uint32(len(msg)))
		data := append(pre[:], msg...)
		for len(data) > 0 {
			// Waiting for window gives up the lock: flush what is
			// written, or the peer never sees the data it must return.
			for min(hc.sendWin, hc.strWin[id]) <= 0 && !hc.closed {
				if err := hc.bw.Flush(); err != nil {
					return err
				}
				hc.winCond.Wait()
			}
			if hc.closed {
				return io.EOF
			}
			n := min(int64(len(data)), int64(hc.maxFrame), hc.sendWin, hc.strWin[id])
			hc.sendWin -= n
			hc.strWin[id] -= n
			if err := hc.fr.WriteData(id, false, data[:n]); err != nil {
				return err
			}
			data = data[n:]
		}
	}
	hc.hbuf.Reset()
	hc.henc.WriteField(hpack.HeaderField{Name: "grpc-status", Value: status})
	if text != "" {
		hc.henc.WriteField(hpack.HeaderField{Name: "grpc-message", Value: text})
	}
	if err := hc.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hc.hbuf.Bytes(), EndHeaders: true, EndStream: true}); err != nil {
		return err
	}
	return hc.bw.Flush()
}
