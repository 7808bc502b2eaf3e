package statemachine

import "fmt"

// What the table says about each Op, Code and Kind lives in the three
// tables below, indexed by value; everything else looks it up there
// instead of switching on the value, so a new one is one row (and the
// tests in ops_test.go fail until every row is complete). The one switch
// left is Apply's dispatch, which TestEveryOpIsApplied checks.

// needs is what a command of an op must carry to be valid.
type needs uint8

const (
	needLock  needs = 1 << iota // a valid Kind and a non-empty Key
	needOwner                   // a non-empty Owner
	needConn                    // a non-empty ConnID
	needLease                   // LeaseMs > 0
	needToken                   // Token != 0
)

type opSpec struct {
	name string // as in logs and Raft log dumps
	// needs: the fields without which apply refuses the command as
	// malformed. It depends only on the command, so every replica reaches
	// the same verdict.
	needs needs
	// groupable: the op touches exactly one lock, so it may share a
	// grouped entry with other commands (see batch.go). CLEANUP_CONNECTION
	// and FORCE_RELEASE go alone.
	groupable bool
	// storesCaller: the table keeps the command's Owner and ConnID with
	// the lock (interned, see intern).
	storesCaller bool
}

var opSpecs = [...]opSpec{
	OpAcquire:           {name: "ACQUIRE", needs: needLock | needOwner | needConn | needLease, groupable: true, storesCaller: true},
	OpRelease:           {name: "RELEASE", needs: needLock | needOwner, groupable: true},
	OpRenew:             {name: "RENEW", needs: needLock | needOwner | needConn | needLease, groupable: true, storesCaller: true},
	OpCancelWait:        {name: "CANCEL_WAIT", needs: needLock | needOwner | needConn, groupable: true},
	OpExpire:            {name: "EXPIRE", needs: needLock, groupable: true},
	OpCleanupConnection: {name: "CLEANUP_CONNECTION", needs: needConn},
	OpForceRelease:      {name: "FORCE_RELEASE", needs: needLock},
	OpClaim:             {name: "CLAIM", needs: needLock | needOwner | needConn | needLease | needToken, groupable: true, storesCaller: true},
}

// spec returns o's row; ok is false for a value that is no Op.
func (o Op) spec() (opSpec, bool) {
	if int(o) >= len(opSpecs) || opSpecs[o].name == "" {
		return opSpec{}, false
	}
	return opSpecs[o], true
}

func (o Op) String() string {
	if s, ok := o.spec(); ok {
		return s.name
	}
	return fmt.Sprintf("Op(%d)", uint8(o))
}

// Ops lists every Op, in value order.
func Ops() []Op {
	var out []Op
	for o := range opSpecs {
		if opSpecs[o].name != "" {
			out = append(out, Op(o))
		}
	}
	return out
}

// valid checks what apply relies on.
func (c Command) valid() bool {
	s, ok := c.Op.spec()
	if !ok || c.LeaseAtNow && c.Op != OpClaim {
		return false
	}
	return (s.needs&needLock == 0 || c.Kind.valid() && c.Key != "") &&
		(s.needs&needOwner == 0 || c.Owner != "") &&
		(s.needs&needConn == 0 || c.ConnID != "") &&
		(s.needs&needLease == 0 || c.LeaseMs > 0) &&
		(s.needs&needToken == 0 || c.Token != 0)
}

// Groupable reports whether op may share an entry with other commands.
func Groupable(op Op) bool {
	s, _ := op.spec()
	return s.groupable
}

// codeNames are the verdicts' names, as in logs and the admin API's
// errors. What a client is told for each is the gateway's (its own table).
var codeNames = [...]string{
	CodeOK:             "ok",
	CodeHeld:           "held",
	CodeNotOwner:       "not_owner",
	CodeNotFound:       "not_found",
	CodeNotExpired:     "not_expired",
	CodeMalformed:      "malformed",
	CodeTooManyLocks:   "too_many_locks",
	CodeTooManyWaiters: "too_many_waiters",
	CodeClaimPending:   "claim_pending",
}

func (c Code) String() string {
	if int(c) < len(codeNames) && codeNames[c] != "" {
		return codeNames[c]
	}
	return fmt.Sprintf("code_%d", uint8(c))
}

// Codes lists every Code, in value order.
func Codes() []Code {
	out := make([]Code, len(codeNames))
	for c := range codeNames {
		out[c] = Code(c)
	}
	return out
}

// kindNames are the Nacos lockType strings.
var kindNames = [...]string{
	KindNacosLock:    "NACOS_LOCK",
	KindReentrant:    "REENTRANT",
	KindNonReentrant: "NON_REENTRANT",
}

func (k Kind) valid() bool { return int(k) < len(kindNames) && kindNames[k] != "" }

// String returns the Nacos lockType string.
func (k Kind) String() string {
	if k.valid() {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// ParseKind maps a Nacos lockType string (exactly, as Nacos compares it)
// to a Kind.
func ParseKind(s string) (Kind, bool) {
	for k, name := range kindNames {
		if name != "" && name == s {
			return Kind(k), true
		}
	}
	return 0, false
}

// Kinds lists every Kind, in value order.
func Kinds() []Kind {
	var out []Kind
	for k := range kindNames {
		if kindNames[k] != "" {
			out = append(out, Kind(k))
		}
	}
	return out
}
