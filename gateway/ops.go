package gateway

import (
	"nacos-lockd/protocol"
	"nacos-lockd/statemachine"
)

// What a client is told, and what the metrics say, about each operation a
// client may send and each verdict of the table: one row each, looked up
// instead of switched on. ops_test.go fails when a statemachine Op or
// Code has no row here (or is not named as the server's own).

// clientOp is an operation clients send (lockOperationEnum).
type clientOp struct {
	wire protocol.LockOp
	op   statemachine.Op
	// label is the op's metric label; okLabel the result label of its
	// success.
	label, okLabel string
	// nacosGroup is the Nacos counter family it is counted in:
	// grpcLock*, grpcRenew* or grpcUnLock* (CANCEL_WAIT is an unlock, as
	// in Nacos).
	nacosGroup string
	// writeFailure is the text Nacos SDK users know for the operation
	// when it could not be committed.
	writeFailure string
}

var clientOps = []clientOp{
	{protocol.OpAcquire, statemachine.OpAcquire, "acquire", "granted", "acquire", "tryLock error."},
	{protocol.OpRelease, statemachine.OpRelease, "release", "released", "unlock", "unLock error."},
	{protocol.OpRenew, statemachine.OpRenew, "renew", "renewed", "renew", "renew error."},
	{protocol.OpCancelWait, statemachine.OpCancelWait, "cancel_wait", "cancelled", "unlock", "cancel wait error."},
}

// serverOps are proposed by the server itself, never on a client's
// request: a client naming one gets msgNoHandler.
var serverOps = []statemachine.Op{
	statemachine.OpExpire, statemachine.OpCleanupConnection, statemachine.OpForceRelease, statemachine.OpClaim,
}

// Anything a client sends that is no client operation (or nothing).
const (
	invalidLabel        = "invalid"
	invalidNacosGroup   = "unlock" // Nacos counts unknown operations as unlocks
	invalidWriteFailure = "lock operation error."
)

func clientOpByWire(w protocol.LockOp) (clientOp, bool) {
	for _, o := range clientOps {
		if o.wire == w {
			return o, true
		}
	}
	return clientOp{}, false
}

func clientOpOf(op statemachine.Op) (clientOp, bool) {
	for _, o := range clientOps {
		if o.op == op {
			return o, true
		}
	}
	return clientOp{}, false
}

// verdict is what the gateway makes of one statemachine.Code.
type verdict struct {
	// label is the metric result label (a success takes its op's okLabel
	// instead; a refused ACQUIRE that queued is "queued").
	label string
	// message is the client's lockResult.errorMessage for the refusal
	// (Nacos's text where Nacos has one).
	message string
	// limit names the table limit a refusal hit (its limit_rejections
	// label); such a refusal is answered as Nacos's OVER_THRESHOLD and
	// counted as "limited".
	limit string
}

var verdicts = [...]verdict{
	statemachine.CodeOK:         {},
	statemachine.CodeHeld:       {label: "refused", message: "Lock is held by another owner"},
	statemachine.CodeNotOwner:   {label: "not_owner", message: "Unlock failed: not held by this owner"},
	statemachine.CodeNotFound:   {label: "not_found", message: "Lock does not exist or already expired"},
	statemachine.CodeNotExpired: {label: "error", message: "Lock not expired or not found"},
	statemachine.CodeMalformed:  {label: "error", message: "lockOperation is not exist."},
	// Ours: the limits the gateway stamps into commands.
	statemachine.CodeTooManyLocks:   {"limited", "Too many locks: the server holds the most lock entries it is configured for (nacos.lock.max_locks)", "locks"},
	statemachine.CodeTooManyWaiters: {"limited", "Too many waiters for this lock (nacos.lock.max_waiters_per_lock)", "waiters_per_lock"},
	// Proposed again by lock until it resolves; only a request whose
	// deadline came first ends with it, answered as not committed.
	statemachine.CodeClaimPending: {label: "error", message: "The owner's grant is being claimed on another connection"},
}

func verdictOf(c statemachine.Code) verdict {
	if int(c) < len(verdicts) {
		return verdicts[c]
	}
	return verdict{label: "error"}
}

// message is the client's text for a refusal, empty on success.
func message(res statemachine.Result) string { return verdictOf(res.Code).message }

// writeFailure is the text Nacos SDK users know for a lock write that
// could not be committed.
func writeFailure(w protocol.LockOp) string {
	if o, ok := clientOpByWire(w); ok {
		return o.writeFailure
	}
	return invalidWriteFailure
}

// nacosOpOf files a request under Nacos's counters: acquire, renew, or
// (CANCEL_WAIT, RELEASE and anything unknown) unlock.
func nacosOpOf(w protocol.LockOp) string {
	if o, ok := clientOpByWire(w); ok {
		return o.nacosGroup
	}
	return invalidNacosGroup
}

func opLabel(op statemachine.Op) string {
	if o, ok := clientOpOf(op); ok {
		return o.label
	}
	return invalidLabel
}

func resultLabel(op statemachine.Op, res statemachine.Result) string {
	switch {
	case res.Code == statemachine.CodeOK:
		if o, ok := clientOpOf(op); ok {
			return o.okLabel
		}
		return "cancelled"
	case res.Code == statemachine.CodeHeld && res.WaitPosition >= 0:
		return "queued"
	}
	return verdictOf(res.Code).label
}
