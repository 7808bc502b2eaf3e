package statemachine

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Snapshot content (the "lock" entry of nacos_lock.zip):
//
//	magic "nacos-lockd-locks\n", uvarint format version
//	v1: uvarint applied index, varint clock, uvarint fence high-water mark,
//	    then per lock in storage key order: 'L', bytes storage key, bytes record,
//	    then 'E', uvarint number of locks.
//
// Same state, same bytes: records come from one ordered read. Readers for
// every version ever written stay here, each building the current table.
const (
	snapshotMagic   = "nacos-lockd-locks\n"
	snapshotVersion = 1
	// maxSnapshotField bounds a single key or record read from a snapshot so
	// a corrupt length cannot make us allocate gigabytes.
	maxSnapshotField = 64 << 20
)

type snapshotMeta struct {
	applied uint64
	clock   int64
	fence   uint64
}

// writeSnapshot streams the header and the records produced by each, which
// must yield (storage key, record) pairs in ascending key order.
func writeSnapshot(w io.Writer, meta snapshotMeta, each func(emit func(key, rec []byte) error) error) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	var n uint64
	b := binary.AppendUvarint([]byte(snapshotMagic), snapshotVersion)
	b = binary.AppendUvarint(b, meta.applied)
	b = binary.AppendVarint(b, meta.clock)
	b = binary.AppendUvarint(b, meta.fence)
	if _, err := bw.Write(b); err != nil {
		return fmt.Errorf("write snapshot header: %w", err)
	}
	err := each(func(key, rec []byte) error {
		b = append(b[:0], 'L')
		b = binary.AppendUvarint(b, uint64(len(key)))
		b = append(b, key...)
		b = binary.AppendUvarint(b, uint64(len(rec)))
		b = append(b, rec...)
		n++
		_, err := bw.Write(b)
		return err
	})
	if err != nil {
		return fmt.Errorf("write snapshot records: %w", err)
	}
	b = append(b[:0], 'E')
	b = binary.AppendUvarint(b, n)
	if _, err := bw.Write(b); err != nil {
		return fmt.Errorf("write snapshot trailer: %w", err)
	}
	return bw.Flush()
}

// readSnapshot parses snapshot content into a fresh table.
func readSnapshot(r io.Reader) (*Table, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != snapshotMagic {
		return nil, fmt.Errorf("%w: not a nacos-lockd snapshot", errMalformed)
	}
	version, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot version: %v", errMalformed, err)
	}
	switch version {
	case 1:
		return readSnapshotV1(br)
	}
	return nil, fmt.Errorf("%w: snapshot format version %d is newer than this build understands", errMalformed, version)
}

func readSnapshotV1(br *bufio.Reader) (*Table, error) {
	t := NewTable()
	var err error
	if t.applied, err = binary.ReadUvarint(br); err == nil {
		t.clock, err = binary.ReadVarint(br)
	}
	if err == nil {
		t.fence, err = binary.ReadUvarint(br)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot meta: %v", errMalformed, err)
	}
	var prev []byte
	var n uint64
	for {
		tag, err := br.ReadByte()
		if err != nil {
			return nil, fmt.Errorf("%w: snapshot ends without trailer", errMalformed)
		}
		if tag == 'E' {
			count, err := binary.ReadUvarint(br)
			if err != nil || count != n {
				return nil, fmt.Errorf("%w: snapshot trailer count %d, read %d locks", errMalformed, count, n)
			}
			if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("%w: data after snapshot trailer", errMalformed)
			}
			return t, nil
		}
		if tag != 'L' {
			return nil, fmt.Errorf("%w: snapshot record tag %#x", errMalformed, tag)
		}
		key, err := readField(br)
		if err != nil {
			return nil, err
		}
		rec, err := readField(br)
		if err != nil {
			return nil, err
		}
		if prev != nil && bytes.Compare(prev, key) >= 0 {
			return nil, fmt.Errorf("%w: snapshot records out of order", errMalformed)
		}
		prev = key
		id, err := parseLockKey(key)
		if err != nil {
			return nil, err
		}
		l, err := decodeRecord(rec)
		if err != nil {
			return nil, err
		}
		if l.token > t.fence {
			return nil, fmt.Errorf("%w: lock token %d above fence %d", errMalformed, l.token, t.fence)
		}
		t.put(id, l)
		n++
	}
}

func readField(br *bufio.Reader) ([]byte, error) {
	n, err := binary.ReadUvarint(br)
	if err != nil || n > maxSnapshotField {
		return nil, fmt.Errorf("%w: snapshot field length", errMalformed)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(br, b); err != nil {
		return nil, fmt.Errorf("%w: truncated snapshot field", errMalformed)
	}
	return b, nil
}

// eachRecord yields the table's locks as (storage key, record) in key order.
func (t *Table) eachRecord(emit func(key, rec []byte) error) error {
	ids := make([]lockID, 0, len(t.locks))
	for id := range t.locks {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, compareIDs)
	for _, id := range ids {
		if err := emit(lockKey(id), encodeRecord(t.locks[id])); err != nil {
			return err
		}
	}
	return nil
}

// StateBytes is the table's snapshot content. Two replicas that applied
// the same entries return identical bytes.
func (t *Table) StateBytes() []byte {
	var buf bytes.Buffer
	_ = writeSnapshot(&buf, snapshotMeta{t.applied, t.clock, t.fence}, t.eachRecord)
	return buf.Bytes()
}
