package statemachine

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Snapshot content (the "lock" entry of nacos_lock.zip):
//
//	magic "nacos-lockd-locks\n", uvarint format version, then by version:
//	v1: uvarint applied index, varint clock, uvarint fence high-water mark,
//	    then per lock in storage key order: 'L', bytes storage key, bytes record,
//	    then 'E', uvarint number of locks.
//	v2: as v1 with uvarint token base after the fence.
//	v3: as v2; every record is record version 2 (with the grant's
//	    acquiredAt). v1 and v2 hold version 1 records only.
//	v4: as v3 with uvarint cluster level after the token base.
//
// A writer writes v4 only for a table whose cluster level is above the
// baseline, and v3 otherwise: snapshots are streamed to lagging members,
// and while the level is the baseline some member may be a build that
// reads v3 at most (v3 then means level LevelBaseline).
//
// Same state, same bytes: records come from one ordered read. Readers for
// every version ever written stay here, each building the current table;
// testdata/ holds a golden archive of each, loaded by the tests forever.
// Writers only write the current version.
const (
	snapshotMagic = "nacos-lockd-locks\n"
	// SnapshotVersion is the newest format this build writes (for a
	// table above the baseline level; BaselineSnapshotVersion otherwise).
	SnapshotVersion = 4
	// BaselineSnapshotVersion is what a table at LevelBaseline is
	// written in: the newest format builds without the gate read.
	BaselineSnapshotVersion = 3
	// maxSnapshotField bounds a single key or record read from a snapshot so
	// a corrupt length cannot make us allocate gigabytes.
	maxSnapshotField = 64 << 20
	// maxTokenBase keeps token base + Raft index far from overflowing.
	maxTokenBase = 1 << 62
)

type snapshotMeta struct {
	applied   uint64
	clock     int64
	fence     uint64
	tokenBase uint64 // v2
	level     int    // v4; LevelBaseline before
}

// version is the format meta's table is written in.
func (m snapshotMeta) version() uint64 {
	if m.level > LevelBaseline {
		return SnapshotVersion
	}
	return BaselineSnapshotVersion
}

// writeSnapshot streams the header and the records produced by each, which
// must yield (storage key, record) pairs in ascending key order.
func writeSnapshot(w io.Writer, meta snapshotMeta, each func(emit func(key, rec []byte) error) error) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	var n uint64
	version := meta.version()
	b := binary.AppendUvarint([]byte(snapshotMagic), version)
	b = binary.AppendUvarint(b, meta.applied)
	b = binary.AppendVarint(b, meta.clock)
	b = binary.AppendUvarint(b, meta.fence)
	b = binary.AppendUvarint(b, meta.tokenBase)
	if version >= 4 {
		b = binary.AppendUvarint(b, uint64(meta.level))
	}
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
	t, _, err := readSnapshotVersion(r)
	return t, err
}

// readSnapshotVersion parses snapshot content of any version into a fresh
// table, and reports the version it found.
func readSnapshotVersion(r io.Reader) (*Table, uint64, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(br, magic); err != nil || string(magic) != snapshotMagic {
		return nil, 0, fmt.Errorf("%w: not a nacos-lockd snapshot", errMalformed)
	}
	version, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: snapshot version: %v", errMalformed, err)
	}
	var t *Table
	switch version {
	case 1:
		t, err = readSnapshotV1(br)
	case 2:
		t, err = readSnapshotV2(br)
	case 3:
		t, err = readSnapshotV3(br)
	case 4:
		t, err = readSnapshotV4(br)
	default:
		return nil, version, fmt.Errorf("%w: snapshot format version %d is newer than this build understands (it reads 1 to %d)", errMalformed, version, SnapshotVersion)
	}
	return t, version, err
}

// readSnapshotV1 reads format 1, written before token bases existed: every
// token was the granting entry's index, which is token base 0.
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
	if err := checkMeta(t); err != nil {
		return nil, err
	}
	return t, readRecords(br, t, 1)
}

// checkMeta refuses metadata no table can have: every token is the token
// base plus the index of an applied entry, or an imported one at most the
// base, so the fence is at most base + applied.
func checkMeta(t *Table) error {
	if t.tokenBase > t.fence || t.tokenBase > maxTokenBase || t.fence-t.tokenBase > t.applied {
		return fmt.Errorf("%w: fence %d outside token base %d .. token base + applied index %d", errMalformed, t.fence, t.tokenBase, t.applied)
	}
	return nil
}

// readSnapshotV2 reads format 2: format 1 plus the token base. Its
// records predate acquiredAt, which reads as 0 (unknown).
func readSnapshotV2(br *bufio.Reader) (*Table, error) {
	t, err := readMetaWithBase(br)
	if err != nil {
		return nil, err
	}
	return t, readRecords(br, t, 1)
}

// readSnapshotV3 reads format 3: format 2's header, records of version 2.
func readSnapshotV3(br *bufio.Reader) (*Table, error) {
	t, err := readMetaWithBase(br)
	if err != nil {
		return nil, err
	}
	return t, readRecords(br, t, 2)
}

// readSnapshotV4 reads format 4: format 3 with the cluster level after
// the token base. Only a table above the baseline is written in it.
func readSnapshotV4(br *bufio.Reader) (*Table, error) {
	t, err := readMetaWithBase(br)
	if err != nil {
		return nil, err
	}
	l, err := binary.ReadUvarint(br)
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot cluster level: %v", errMalformed, err)
	}
	if l <= LevelBaseline {
		return nil, fmt.Errorf("%w: snapshot format 4 at cluster level %d (written only above %d)", errMalformed, l, LevelBaseline)
	}
	if err := checkLevel(l); err != nil {
		return nil, err
	}
	t.level = int(l)
	return t, readRecords(br, t, 2)
}

// readMetaWithBase reads the table header of formats 2 to 4.
func readMetaWithBase(br *bufio.Reader) (*Table, error) {
	t := NewTable()
	var err error
	if t.applied, err = binary.ReadUvarint(br); err == nil {
		t.clock, err = binary.ReadVarint(br)
	}
	if err == nil {
		t.fence, err = binary.ReadUvarint(br)
	}
	if err == nil {
		t.tokenBase, err = binary.ReadUvarint(br)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: snapshot meta: %v", errMalformed, err)
	}
	if err := checkMeta(t); err != nil {
		return nil, err
	}
	return t, nil
}

// readRecords reads the lock records and trailer shared by every version.
// Each format holds records of exactly one record version.
func readRecords(br *bufio.Reader, t *Table, recVersion byte) error {
	var prev []byte
	var n uint64
	var locks []storedLock
	ns := names{}
	for {
		tag, err := br.ReadByte()
		if err != nil {
			return fmt.Errorf("%w: snapshot ends without trailer", errMalformed)
		}
		if tag == 'E' {
			count, err := binary.ReadUvarint(br)
			if err != nil || count != n {
				return fmt.Errorf("%w: snapshot trailer count %d, read %d locks", errMalformed, count, n)
			}
			if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
				return fmt.Errorf("%w: data after snapshot trailer", errMalformed)
			}
			t.putAll(locks)
			return nil
		}
		if tag != 'L' {
			return fmt.Errorf("%w: snapshot record tag %#x", errMalformed, tag)
		}
		key, err := readField(br)
		if err != nil {
			return err
		}
		rec, err := readField(br)
		if err != nil {
			return err
		}
		if prev != nil && bytes.Compare(prev, key) >= 0 {
			return fmt.Errorf("%w: snapshot records out of order", errMalformed)
		}
		prev = key
		id, err := parseLockKey(key)
		if err != nil {
			return err
		}
		if len(rec) == 0 || rec[0] != recVersion {
			return fmt.Errorf("%w: snapshot record of version %d, want %d", errMalformed, firstByte(rec), recVersion)
		}
		l, err := decodeRecord(rec, ns)
		if err != nil {
			return err
		}
		if err := checkStored(id, l, t.fence); err != nil {
			return err
		}
		locks = append(locks, storedLock{id, l})
		n++
	}
}

// checkStored refuses a lock the table could never have persisted: every
// stored lock is held (a lock that becomes free is handed to its first
// waiter or deleted in the same apply), and no token is above the fence.
func checkStored(id lockID, l *lockState, fence uint64) error {
	if !l.held() {
		return fmt.Errorf("%w: stored lock %s %q is free", errMalformed, id.kind, id.key)
	}
	if l.token == 0 || l.token > fence {
		return fmt.Errorf("%w: lock token %d outside 1 .. fence %d", errMalformed, l.token, fence)
	}
	owners := make(map[string]bool, len(l.queue()))
	for _, w := range l.queue() {
		if w.owner == "" || w.owner == l.owner || owners[w.owner] {
			return fmt.Errorf("%w: stored lock %s %q queues owner %q twice or behind itself", errMalformed, id.kind, id.key, w.owner)
		}
		owners[w.owner] = true
	}
	return nil
}

func firstByte(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
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
	var err error
	t.locks.Ascend(func(l *lockState) bool {
		err = emit(lockKey(l.id()), encodeRecord(l))
		return err == nil
	})
	return err
}

// StateBytes is the table's snapshot content. Two replicas that applied
// the same entries return identical bytes.
func (t *Table) StateBytes() []byte {
	var buf bytes.Buffer
	_ = t.WriteSnapshot(&buf)
	return buf.Bytes()
}
