package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	pb "github.com/lni/dragonboat/v4/raftpb"
)

// A record is a header and a payload. The header is the payload's length
// and its CRC-32C, little-endian; a length of zero is the padding past the
// last record. The payload's first byte is its kind.
const headerSize = 8

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Record kinds.
const (
	// kindCheckpoint opens every segment: every node's metadata, so that
	// the segments before it can go once no entry in them is needed.
	kindCheckpoint byte = 1 + iota
	// kindUpdates is one SaveRaftState: states, snapshots, entries.
	kindUpdates
	// kindBootstrap is one SaveBootstrapInfo.
	kindBootstrap
	// kindSnapshots is one SaveSnapshots.
	kindSnapshots
	// kindRemoveNode is one RemoveNodeData.
	kindRemoveNode
	// kindImport is one ImportSnapshot.
	kindImport
)

// Flags of an update in a kindUpdates record.
const (
	updState    = 1 << 0
	updSnapshot = 1 << 1
)

// Flags of a node in a kindCheckpoint record.
const (
	ckBootstrap = 1 << 0
	ckState     = 1 << 1
	ckMax       = 1 << 2
)

// errCorrupt is a record whose CRC matches but whose payload does not
// parse: not a torn write, so replay stops with an error.
var errCorrupt = errors.New("raftlog: corrupt record")

// builder builds one record in buf, leaving room for the header.
type builder struct{ buf []byte }

func (b *builder) reset(kind byte) {
	b.buf = append(b.buf[:0], make([]byte, headerSize)...)
	b.buf = append(b.buf, kind)
}

func (b *builder) uvarint(v uint64) { b.buf = binary.AppendUvarint(b.buf, v) }

func (b *builder) bytes(p []byte) {
	b.uvarint(uint64(len(p)))
	b.buf = append(b.buf, p...)
}

// marshaled appends m's encoding with its length before it.
func (b *builder) marshaled(m interface {
	Size() int
	MarshalTo([]byte) (int, error)
}) error {
	n := m.Size()
	b.uvarint(uint64(n))
	start := len(b.buf)
	b.buf = append(b.buf, make([]byte, n)...)
	if _, err := m.MarshalTo(b.buf[start:]); err != nil {
		return fmt.Errorf("raftlog: encode: %w", err)
	}
	return nil
}

// entry appends e as its index, its length and its encoding, and returns
// where the encoding starts in buf and its length.
func (b *builder) entry(e *pb.Entry) (int, int, error) {
	b.uvarint(e.Index)
	n := e.Size()
	b.uvarint(uint64(n))
	start := len(b.buf)
	// dragonboat's encoder wants room for its upper bound.
	b.buf = append(b.buf, make([]byte, e.SizeUpperLimit())...)
	k, err := e.MarshalTo(b.buf[start:])
	if err != nil {
		return 0, 0, fmt.Errorf("raftlog: encode entry %d: %w", e.Index, err)
	}
	if k != n {
		return 0, 0, fmt.Errorf("raftlog: entry %d encoded to %d bytes, sized %d", e.Index, k, n)
	}
	b.buf = b.buf[:start+n]
	return start, n, nil
}

// seal writes the header and returns the whole record.
func (b *builder) seal() []byte {
	p := b.buf[headerSize:]
	binary.LittleEndian.PutUint32(b.buf[0:4], uint32(len(p)))
	binary.LittleEndian.PutUint32(b.buf[4:8], crc32.Checksum(p, castagnoli))
	return b.buf
}

// nextRecord returns the payload of the record at data[off:] and the
// offset after it; ok is false at the end of the records: padding, a
// record cut short or one whose CRC does not match (a write torn by a
// crash: the records before it are whole).
func nextRecord(data []byte, off int) (payload []byte, next int, ok bool) {
	if off+headerSize > len(data) {
		return nil, off, false
	}
	n := int(binary.LittleEndian.Uint32(data[off:]))
	sum := binary.LittleEndian.Uint32(data[off+4:])
	if n == 0 || n > len(data)-off-headerSize {
		return nil, off, false
	}
	p := data[off+headerSize : off+headerSize+n]
	if crc32.Checksum(p, castagnoli) != sum {
		return nil, off, false
	}
	return p, off + headerSize + n, true
}

// reader parses a payload; the first error sticks.
type reader struct {
	p   []byte
	pos int
	err error
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.p[r.pos:])
	if n <= 0 {
		r.err = errCorrupt
		return 0
	}
	r.pos += n
	return v
}

func (r *reader) byte() byte {
	if r.err != nil || r.pos >= len(r.p) {
		r.err = errCorrupt
		return 0
	}
	v := r.p[r.pos]
	r.pos++
	return v
}

// bytes returns the next length-prefixed bytes, and where they start.
func (r *reader) bytes() ([]byte, int) {
	n := r.uvarint()
	if r.err != nil {
		return nil, 0
	}
	if n > uint64(len(r.p)-r.pos) {
		r.err = errCorrupt
		return nil, 0
	}
	start := r.pos
	r.pos += int(n)
	return r.p[start:r.pos], start
}

func (r *reader) unmarshal(m interface{ Unmarshal([]byte) error }) {
	b, _ := r.bytes()
	if r.err != nil {
		return
	}
	if err := m.Unmarshal(b); err != nil {
		r.err = fmt.Errorf("%w: %v", errCorrupt, err)
	}
}

func (r *reader) done() error {
	if r.err == nil && r.pos != len(r.p) {
		r.err = errCorrupt
	}
	return r.err
}
