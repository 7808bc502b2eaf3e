package statemachine

import (
	"encoding/binary"
	"fmt"
)

// Cluster levels: the version gate (DESIGN.md, Cluster level).
//
// A level names a set of encodings every member of the cluster can read.
// A node advertises the highest level its build reads (MaxLevel); the
// leader proposes a level entry once every member advertises at least
// that level, and every proposer picks its encodings from the level its
// own replica has applied. The level is part of the table: it only rises,
// it is persisted and carried by snapshots, so an entry that uses a
// feature always follows, in the log, the level entry that allowed it.
const (
	// LevelBaseline is what a member that does not advertise is taken to
	// read: v0.15.0 (commit 46782b5), the last build before CLAIM's
	// LeaseAtNow flag. It reads commands 1 and 2, batch frames 3 to 5
	// (FORCE_RELEASE, table limits, group commit, several commands per
	// lock, CLAIM without flags), records 1 and 2, snapshots 1 to 3.
	// Every later build without the gate reads at least as much; builds
	// older than v0.15.0 must be upgraded to it first.
	LevelBaseline = 1
	// LevelGate adds the level entry itself, CLAIM's LeaseAtNow flag (and
	// so claims answered from a read) and snapshot format 4 (format 3
	// plus the level).
	LevelGate = 2
	// LevelOwnerMoves changes apply rules, not an encoding: for an owner
	// that moves to another connection while the CLAIM of a claim answered
	// from a read is not yet in the log (its RENEW there claims the grant,
	// the CLAIM then changes nothing, its fresh ACQUIRE or CANCEL_WAIT
	// there waits: DESIGN.md). Replicas must agree on the rules, so they
	// follow the level entry.
	LevelOwnerMoves = 3
	// MaxLevel is the highest level this build reads.
	MaxLevel = LevelOwnerMoves
	// LevelLeaseAtNow is the level from which CLAIMs with LeaseAtNow, the
	// only CLAIMs this build writes, may be proposed.
	LevelLeaseAtNow = LevelGate
)

// Versions is what a build reads: the highest command, batch frame,
// record and snapshot versions and the cluster level they add up to. A
// node advertises its own (BuildVersions) to the others.
type Versions struct {
	Level    int `json:"level"`
	Command  int `json:"command"`
	Frame    int `json:"frame"`
	Record   int `json:"record"`
	Snapshot int `json:"snapshot"`
}

// BuildVersions is what this build reads.
func BuildVersions() Versions {
	return Versions{Level: MaxLevel, Command: commandVersionV2, Frame: SharedLockBatchVersion, Record: recordVersion, Snapshot: SnapshotVersion}
}

// levelEntryVersion is the first byte of a level entry; it shares the
// byte with commands (1, 2) and batch frames (3 to 5). Builds without the
// gate refuse it as malformed, which is why it is only proposed once every
// member advertises LevelGate or more.
const levelEntryVersion = 6

// IsLevelEntry reports whether a log entry is a level entry.
func IsLevelEntry(entry []byte) bool { return len(entry) > 0 && entry[0] == levelEntryVersion }

// EncodeLevel is the log entry that raises the cluster level to level.
func EncodeLevel(level int) []byte {
	return binary.AppendUvarint([]byte{levelEntryVersion}, uint64(level))
}

// DecodeLevel reads a level entry.
func DecodeLevel(entry []byte) (int, error) {
	r := reader{b: entry}
	if v := r.byte(); r.err == nil && v != levelEntryVersion {
		return 0, fmt.Errorf("%w: level entry version %d", errMalformed, v)
	}
	l := r.uvarint()
	if r.err != nil {
		return 0, r.err
	}
	if len(r.b) != 0 {
		return 0, fmt.Errorf("%w: %d trailing bytes after level", errMalformed, len(r.b))
	}
	if l < LevelBaseline || l > 1<<20 {
		return 0, fmt.Errorf("%w: cluster level %d", errMalformed, l)
	}
	return int(l), nil
}

// LevelOutcome is what applying a level entry did.
type LevelOutcome int

const (
	LevelRaised     LevelOutcome = iota // the level rose to the entry's
	LevelUnchanged                      // the entry's level is the table's already
	LevelRefused                        // a lower level: the level never falls
	LevelMalformed                      // the entry does not decode
	LevelUnreadable                     // above MaxLevel: this build cannot go on applying the log
)

// ApplyLevel applies a level entry at index. The level only rises: an
// entry below the table's level changes nothing (a leader whose poll
// raced a newer entry proposes one). An entry above MaxLevel also changes
// nothing but is reported as LevelUnreadable: every entry after it may
// use encodings this build does not know, so the replica must stop
// rather than diverge.
func (t *Table) ApplyLevel(index uint64, entry []byte) (LevelOutcome, int) {
	t.applied = index
	l, err := DecodeLevel(entry)
	switch {
	case err != nil:
		return LevelMalformed, 0
	case l > MaxLevel:
		return LevelUnreadable, l
	case l < t.level:
		return LevelRefused, l
	case l == t.level:
		return LevelUnchanged, l
	}
	t.level = l
	t.levelDirty = true
	return LevelRaised, l
}

// Level is the cluster level the table has applied.
func (t *Table) Level() int { return t.level }

// LevelQuery asks for the table's cluster level (an int).
type LevelQuery struct{}

// ErrLevelUnreadable is returned when a store or snapshot holds a cluster
// level above what this build reads.
var ErrLevelUnreadable = fmt.Errorf("cluster level above the %d this build reads", MaxLevel)

func checkLevel(l uint64) error {
	if l > MaxLevel {
		return fmt.Errorf("%w: the cluster is at level %d; run a build that reads it (this one reads up to %d)", ErrLevelUnreadable, l, MaxLevel)
	}
	return nil
}

// StoredLevel reads the cluster level persisted in a store (LevelBaseline
// when the store has none: a table of a build without the gate, or an
// empty store), without loading the table: what a node checks before it
// starts replaying its log.
func StoredLevel(r StoreReader) (int, error) {
	m, err := readStoredMeta(r)
	if err != nil {
		return 0, err
	}
	return m.level, nil
}
