package statemachine

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Op is a state machine operation. The numeric values are part of the Raft
// log format: never renumber them.
type Op uint8

const (
	OpAcquire           Op = 1
	OpRelease           Op = 2
	OpRenew             Op = 3
	OpCancelWait        Op = 4
	OpExpire            Op = 5 // proposed by the leader's reaper only
	OpCleanupConnection Op = 6 // proposed by the node that held the connection
	OpForceRelease      Op = 7 // proposed by the admin API
	// OpClaim records a claim the gateway already answered from a
	// linearizable read (see the FIFO hand-off in DESIGN.md): it confirms
	// the unclaimed grant with Token to Owner, and does nothing if that
	// grant is no longer there.
	OpClaim Op = 8
)

// Kind is a lock type. Like Op, the values are persisted: never renumber.
type Kind uint8

const (
	KindNacosLock    Kind = 1 // NACOS_LOCK: the Gen 1 mutex, not reentrant
	KindReentrant    Kind = 2 // REENTRANT
	KindNonReentrant Kind = 3 // NON_REENTRANT
)

// Command is one entry of the Raft log. It carries every input the table
// needs, including the time: NowMs is the proposing node's wall clock in
// Unix milliseconds, stamped when the command is proposed.
type Command struct {
	Op     Op
	NowMs  int64
	Kind   Kind
	Key    string
	Owner  string // holder identity; the gateway defaults it to ConnID
	ConnID string // the caller's connection (ACQUIRE, RENEW, CANCEL_WAIT, CLEANUP_CONNECTION)
	// LeaseMs is the lease duration already resolved by the gateway from the
	// Nacos lease rules (default, cap). The end time is computed in apply
	// from the table clock, never by the proposer.
	LeaseMs int64
	// WaitMs > 0 asks to be queued for that long when the lock is held.
	WaitMs int64
	// Retry is the client's waiterRetry flag. The table decides who is the
	// queue head itself, so it is informational only.
	Retry bool
	// LeaseAtNow (CLAIM only) makes the lease run from NowMs instead of
	// from the table clock when the command applies. A CLAIM records a
	// claim already answered from a read, and NowMs is the table clock
	// that read saw: counted from the record's own apply, which comes after
	// the answer, the lease would outlast what the client was told. CLAIMs
	// written before the flag existed keep the clock rule when replayed.
	LeaseAtNow bool
	// Token is the fencing token an EXPIRE refers to: the lease it wants
	// to end. On FORCE_RELEASE a non-zero Token limits the release to that
	// grant; 0 releases whoever holds the lock.
	Token uint64
	// MaxWaiters and MaxLocks are the gateway's limits, carried in the
	// command so every replica enforces the same ones: ACQUIRE refuses to
	// queue beyond MaxWaiters waiters on a lock, and to create a lock entry
	// when the table already holds MaxLocks. 0 means no limit.
	MaxWaiters uint32
	MaxLocks   uint64
}

// Command encodings. Version 1 is the original layout; version 2 appends
// the limits. Encode writes version 1 when there are no limits, so such
// entries stay readable by builds that predate version 2.
const (
	commandVersion   = 1
	commandVersionV2 = 2
)

var errMalformed = errors.New("malformed command")

// Command flag bits. A build refuses an entry with a bit it does not know
// (malformed), so a new bit may only be proposed once every replica reads
// it: LeaseAtNow is written only on CLAIMs, which a node records only at
// cluster level LevelLeaseAtNow (level.go, replica.Node.Record).
const (
	flagRetry      = 1
	flagLeaseAtNow = 2
)

// Encode serialises the command for the Raft log.
func (c Command) Encode() []byte {
	b := make([]byte, 0, 40+len(c.Key)+len(c.Owner)+len(c.ConnID))
	version := byte(commandVersion)
	if c.MaxWaiters != 0 || c.MaxLocks != 0 {
		version = commandVersionV2
	}
	b = append(b, version, byte(c.Op))
	b = binary.AppendVarint(b, c.NowMs)
	b = append(b, byte(c.Kind))
	b = appendString(b, c.Key)
	b = appendString(b, c.Owner)
	b = appendString(b, c.ConnID)
	b = binary.AppendVarint(b, c.LeaseMs)
	b = binary.AppendVarint(b, c.WaitMs)
	var flags byte
	if c.Retry {
		flags |= flagRetry
	}
	if c.LeaseAtNow {
		flags |= flagLeaseAtNow
	}
	b = append(b, flags)
	b = binary.AppendUvarint(b, c.Token)
	if version == commandVersionV2 {
		b = binary.AppendUvarint(b, uint64(c.MaxWaiters))
		b = binary.AppendUvarint(b, c.MaxLocks)
	}
	return b
}

// DecodeCommand parses an encoded command. It never panics; any input it
// cannot read exactly (short, trailing bytes, unknown version) is an error.
func DecodeCommand(data []byte) (Command, error) {
	r := reader{b: data}
	var c Command
	version := r.byte()
	if version != commandVersion && version != commandVersionV2 {
		return Command{}, fmt.Errorf("%w: version %d", errMalformed, version)
	}
	c.Op = Op(r.byte())
	c.NowMs = r.varint()
	c.Kind = Kind(r.byte())
	c.Key = r.string()
	c.Owner = r.string()
	c.ConnID = r.string()
	c.LeaseMs = r.varint()
	c.WaitMs = r.varint()
	flags := r.byte()
	c.Retry = flags&flagRetry != 0
	c.LeaseAtNow = flags&flagLeaseAtNow != 0
	c.Token = r.uvarint()
	if version == commandVersionV2 {
		mw := r.uvarint()
		c.MaxLocks = r.uvarint()
		if mw > 1<<32-1 {
			return Command{}, fmt.Errorf("%w: waiter limit %d", errMalformed, mw)
		}
		c.MaxWaiters = uint32(mw)
		if r.err == nil && c.MaxWaiters == 0 && c.MaxLocks == 0 {
			// Encode never writes that: one command, one encoding.
			return Command{}, fmt.Errorf("%w: version 2 without limits", errMalformed)
		}
	}
	if r.err != nil {
		return Command{}, r.err
	}
	if flags&^(flagRetry|flagLeaseAtNow) != 0 {
		return Command{}, fmt.Errorf("%w: unknown flags %#x", errMalformed, flags)
	}
	if len(r.b) != 0 {
		return Command{}, fmt.Errorf("%w: %d trailing bytes", errMalformed, len(r.b))
	}
	return c, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// reader decodes the varint/length-prefixed encodings used by commands,
// records and snapshots. The first error sticks; later reads return zero.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: truncated %s", errMalformed, what)
	}
	r.b = nil
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) < 1 {
		r.fail("byte")
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail("uvarint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) varint() int64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail("varint")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// name reads an owner or a connection id. With a name table (a load of
// many records) equal names share one copy, found without allocating.
func (r *reader) name(names names) string {
	if names == nil {
		return r.string()
	}
	return names.get(r.field())
}

// names shares the owners and connection ids of the records one load
// decodes: a few hundred clients may hold a million locks.
type names map[string]string

func (ns names) get(b []byte) string {
	if s, ok := ns[string(b)]; ok { // no allocation for the lookup
		return s
	}
	s := string(b)
	ns[s] = s
	return s
}

func (r *reader) string() string {
	return string(r.field())
}

// field reads a length-prefixed byte string; it aliases the input.
func (r *reader) field() []byte {
	n := r.uvarint()
	if r.err != nil {
		return nil
	}
	if n > uint64(len(r.b)) {
		r.fail("string")
		return nil
	}
	b := r.b[:n]
	r.b = r.b[n:]
	return b
}
