package statemachine

import (
	"encoding/binary"
	"fmt"
)

// Storage layout. Lock records live under 'l', kind, key so that byte
// order is (kind, key) order; table metadata lives under 'm'.
const (
	lockPrefix = 'l'
	metaPrefix = 'm'
)

var (
	keyApplied = []byte("m/applied")
	keyClock   = []byte("m/clock")
	keyFence   = []byte("m/fence")
	// keyTokenBase holds Table.tokenBase (absent means 0). It changes only
	// when a whole table is installed (import, restore, snapshot recovery).
	keyTokenBase = []byte("m/tokenbase")
	// keyLevel holds Table.level (absent means LevelBaseline); written
	// only once a level entry raised it.
	keyLevel = []byte("m/level")
)

func lockKey(id lockID) []byte {
	b := make([]byte, 0, 2+len(id.key))
	b = append(b, lockPrefix, byte(id.kind))
	return append(b, id.key...)
}

func parseLockKey(k []byte) (lockID, error) {
	if len(k) < 3 || k[0] != lockPrefix || !Kind(k[1]).valid() {
		return lockID{}, fmt.Errorf("%w: bad lock key %q", errMalformed, k)
	}
	return lockID{kind: Kind(k[1]), key: string(k[2:])}, nil
}

// recordVersion prefixes every stored lock record; this build writes
// version 2 and reads both:
//
//	1: flags, owner, connection, count, lease end, token, waiters
//	2: as 1 with varint acquiredAt after the token (snapshot format 3)
//
// A version 1 record decodes with acquiredAt 0 (unknown). Snapshot format
// 2 added a table-level field (the token base), not a lock field, so it
// still carries version 1 records.
const recordVersion = 2

func encodeRecord(l *lockState) []byte {
	b := make([]byte, 0, 48+len(l.owner)+len(l.connID)+len(l.queue())*48)
	b = append(b, recordVersion)
	var flags byte
	if l.unclaimed {
		flags |= 1
	}
	b = append(b, flags)
	b = appendString(b, l.owner)
	b = appendString(b, l.connID)
	b = binary.AppendUvarint(b, uint64(l.count))
	b = binary.AppendVarint(b, l.leaseEnd)
	b = binary.AppendUvarint(b, l.token)
	b = binary.AppendVarint(b, l.acquiredAt)
	b = binary.AppendUvarint(b, uint64(len(l.queue())))
	for _, w := range l.queue() {
		b = appendString(b, w.owner)
		b = appendString(b, w.connID)
		b = binary.AppendVarint(b, w.enqueued)
		b = binary.AppendVarint(b, w.deadline)
		b = binary.AppendVarint(b, w.leaseMs)
	}
	return b
}

// decodeRecord reads a record of any version this build knows. ns, when
// not nil, shares owners and connection ids across the records of a load.
func decodeRecord(data []byte, ns names) (*lockState, error) {
	r := reader{b: data}
	v := r.byte()
	if r.err == nil && (v < 1 || v > recordVersion) {
		return nil, fmt.Errorf("%w: record version %d", errMalformed, v)
	}
	flags := r.byte()
	l := &lockState{unclaimed: flags&1 != 0}
	l.owner = r.name(ns)
	l.connID = r.name(ns)
	count := r.uvarint()
	l.leaseEnd = r.varint()
	l.token = r.uvarint()
	if v >= 2 {
		l.acquiredAt = r.varint()
	}
	n := r.uvarint()
	if r.err != nil {
		return nil, r.err
	}
	if count > 1<<31-1 || n > uint64(len(r.b)) { // each waiter takes at least one byte
		return nil, fmt.Errorf("%w: record counts out of range", errMalformed)
	}
	l.count = int32(count)
	if n > 0 {
		l.setQueue(make([]waiter, n))
	}
	for i := range l.queue() {
		w := &l.queue()[i]
		w.owner = r.name(ns)
		w.connID = r.name(ns)
		w.enqueued = r.varint()
		w.deadline = r.varint()
		w.leaseMs = r.varint()
	}
	if r.err != nil {
		return nil, r.err
	}
	if len(r.b) != 0 || flags&^1 != 0 {
		return nil, fmt.Errorf("%w: record has trailing data", errMalformed)
	}
	if (l.owner == "") != (l.count == 0) {
		return nil, fmt.Errorf("%w: record holder and count disagree", errMalformed)
	}
	return l, nil
}

func encodeUint(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

func decodeUint(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: meta value of %d bytes", errMalformed, len(b))
	}
	return binary.BigEndian.Uint64(b), nil
}
