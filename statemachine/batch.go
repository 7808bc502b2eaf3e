package statemachine

import (
	"encoding/binary"
	"fmt"
)

// Grouped entries: several commands in one Raft log entry.
//
// A Raft entry costs CPU whatever it carries (proposal bookkeeping, log
// encoding, the apply round, the result hand-back), so the node proposes
// the commands that arrive while earlier entries are committing as one
// entry (group commit, replica/coalesce.go), and collects renews that come in quick
// succession for a short window.
//
// Only commands that touch exactly one lock are grouped. A fencing token
// is the index of the entry that granted it, so one entry must never let
// two clients be told they hold one lock. In frame version 4 each lock has
// at most one command in an entry, so it cannot (each command grants at
// most once: to its caller, or to the queue head). Version 5 lets a lock
// have several, with at most one ACQUIRE, after all the others. Only an
// ACQUIRE grants to its caller, who is told at once; a grant to the queue
// head is told only after the entry applies, by a push whose claim then
// has to find the grant still there. So within an entry every grant but
// the last made for a lock is to someone not told of it, and the last is
// an ACQUIRE's only if nothing after it touches the lock. Every replica
// checks the rules again in apply, so a malformed batch is refused
// identically everywhere.

// Batch frame versions share the first byte with single commands (versions
// 1 and 2). Version 3 may hold only RENEW and EXPIRE (the first build that
// coalesced renews wrote it); version 4 any command that touches one lock,
// one per lock; version 5 several per lock, an ACQUIRE only last for its
// lock. This build writes version 4, or 5 for an entry where a lock has
// more than one command, and reads all three. A build that predates a
// version refuses the whole entry as malformed; every build from the
// baseline release on (LevelBaseline, level.go) reads all three.
// CommandBatchVersion and SharedLockBatchVersion are what a writer
// picks: 5 only when a lock has more than one command in the entry.
const (
	renewBatchVersion      = 3
	CommandBatchVersion    = 4
	SharedLockBatchVersion = 5
)

// MaxBatch bounds the commands in one grouped entry.
const MaxBatch = 256

// allowedIn reports whether a frame of the given version may carry op.
func allowedIn(version byte, op Op) bool {
	if version == renewBatchVersion {
		return op == OpRenew || op == OpExpire
	}
	return Groupable(op)
}

// IsBatch reports whether an entry is a batch frame rather than one
// command.
func IsBatch(entry []byte) bool {
	return len(entry) > 0 && isBatchVersion(entry[0])
}

func isBatchVersion(v byte) bool {
	return v == renewBatchVersion || v == CommandBatchVersion || v == SharedLockBatchVersion
}

// EncodeBatch frames already encoded commands as one entry of the given
// version.
func EncodeBatch(version byte, cmds [][]byte) []byte {
	size := 1 + binary.MaxVarintLen64
	for _, c := range cmds {
		size += binary.MaxVarintLen64 + len(c)
	}
	b := make([]byte, 0, size)
	b = append(b, version)
	b = binary.AppendUvarint(b, uint64(len(cmds)))
	for _, c := range cmds {
		b = binary.AppendUvarint(b, uint64(len(c)))
		b = append(b, c...)
	}
	return b
}

// decodeBatch splits a grouped entry into its frame version and encoded
// commands. It only reads the frame; each command is decoded (and may be
// refused) on its own.
func decodeBatch(data []byte) (byte, [][]byte, error) {
	r := reader{b: data}
	v := r.byte()
	if r.err == nil && !isBatchVersion(v) {
		return 0, nil, fmt.Errorf("%w: batch version %d", errMalformed, v)
	}
	n := r.uvarint()
	if r.err != nil {
		return 0, nil, r.err
	}
	if n == 0 || n > MaxBatch {
		return 0, nil, fmt.Errorf("%w: batch of %d commands", errMalformed, n)
	}
	cmds := make([][]byte, 0, n)
	for range n {
		l := r.uvarint()
		if r.err != nil {
			return 0, nil, r.err
		}
		if l > uint64(len(r.b)) {
			return 0, nil, fmt.Errorf("%w: truncated batch command", errMalformed)
		}
		cmds = append(cmds, r.b[:l:l])
		r.b = r.b[l:]
	}
	if len(r.b) != 0 {
		return 0, nil, fmt.Errorf("%w: %d trailing bytes after batch", errMalformed, len(r.b))
	}
	return v, cmds, nil
}

// ApplyBatch applies a grouped entry: each command in order, all at the
// entry's index. A command that does not decode, may not travel in the
// frame's version, or names a lock that an earlier command of the entry
// already touched (version 4) or already acquired (version 5) is refused
// with CodeMalformed and changes nothing; the others apply normally. A
// frame that does not decode yields no results at all.
func (t *Table) ApplyBatch(index uint64, data []byte) []Result {
	t.applied = index
	version, cmds, err := decodeBatch(data)
	if err != nil {
		return nil
	}
	results := make([]Result, len(cmds))
	closed := make([]lockID, 0, len(cmds)) // locks no further command may touch
	for i, enc := range cmds {
		cmd, err := DecodeCommand(enc)
		id := lockID{cmd.Kind, cmd.Key}
		if err != nil || !allowedIn(version, cmd.Op) || containsID(closed, id) {
			results[i] = refused(CodeMalformed)
			continue
		}
		if version != SharedLockBatchVersion || cmd.Op == OpAcquire {
			closed = append(closed, id)
		}
		results[i] = t.Apply(index, cmd)
	}
	return results
}

func containsID(ids []lockID, id lockID) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// EncodeResults packs a coalesced entry's results, in command order.
func EncodeResults(rs []Result) []byte {
	b := binary.AppendUvarint(make([]byte, 0, 2+8*len(rs)), uint64(len(rs)))
	for _, r := range rs {
		b = appendResult(b, r)
	}
	return b
}

// DecodeResults reads EncodeResults's bytes.
func DecodeResults(b []byte) ([]Result, error) {
	r := reader{b: b}
	n := r.uvarint()
	if r.err == nil && n > MaxBatch {
		return nil, fmt.Errorf("%w: %d batch results", errMalformed, n)
	}
	rs := make([]Result, 0, n)
	for range n {
		rs = append(rs, readResult(&r))
	}
	if r.err != nil {
		return nil, r.err
	}
	return rs, nil
}
