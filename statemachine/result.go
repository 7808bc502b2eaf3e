package statemachine

import (
	"encoding/binary"
)

// Code is the verdict of applying one command. Refusals are codes, not
// errors: Update only fails when storage does.
type Code uint8

const (
	CodeOK             Code = iota // granted, released, renewed, cancelled, expired or cleaned up
	CodeHeld                       // the lock is held by another owner (the caller may have been queued)
	CodeNotOwner                   // release or renew by someone who does not hold the lock
	CodeNotFound                   // release or renew of a lock that is free or does not exist
	CodeNotExpired                 // EXPIRE of a lease that is not over, or was renewed or re-granted
	CodeMalformed                  // the entry could not be decoded or is not a valid command
	CodeTooManyLocks               // ACQUIRE of a new lock while the table holds MaxLocks
	CodeTooManyWaiters             // ACQUIRE that would queue beyond MaxWaiters
	// CodeClaimPending: a fresh ACQUIRE (no waiterRetry) or a CANCEL_WAIT
	// from the owner of an unclaimed grant bound to another connection,
	// from cluster level LevelOwnerMoves. The grant's claim may have been
	// answered from a read there and not be recorded yet, and the answer
	// depends on it (a re-entry or a claim; keeping the lock or giving it
	// up); the gateway proposes the command again until the grant is
	// claimed or gone (DESIGN.md, A claim in no entry of its own).
	CodeClaimPending
)

// Result is what apply returns to the proposer.
type Result struct {
	Code Code
	// Count is the hold count after the operation: 1 after a first acquire,
	// 0 after the final release.
	Count int32
	// WaitPosition is the 0-based queue position when the caller was queued,
	// -1 otherwise.
	WaitPosition int32
	// Token is the fencing token of the caller's grant (ACQUIRE, RENEW).
	Token uint64
}

// Success reports whether the operation did what was asked.
func (r Result) Success() bool { return r.Code == CodeOK }

func refused(code Code) Result { return Result{Code: code, WaitPosition: -1} }

// encodeResult packs a Result into dragonboat's sm.Result data.
// EncodeResult is a result as an entry's result data carries it.
func EncodeResult(r Result) []byte { return appendResult(make([]byte, 0, 16), r) }

// DecodeResult reads EncodeResult's bytes.
func DecodeResult(b []byte) (Result, error) {
	r := reader{b: b}
	res := readResult(&r)
	return res, r.err
}

// appendResult and readResult are one result's encoding, alone or in a
// coalesced entry's list.
func appendResult(b []byte, r Result) []byte {
	b = append(b, byte(r.Code))
	b = binary.AppendVarint(b, int64(r.Count))
	b = binary.AppendVarint(b, int64(r.WaitPosition))
	return binary.AppendUvarint(b, r.Token)
}

func readResult(r *reader) Result {
	return Result{
		Code:         Code(r.byte()),
		Count:        int32(r.varint()),
		WaitPosition: int32(r.varint()),
		Token:        r.uvarint(),
	}
}

// Notification tells the node holding ConnID that Owner has been granted
// the lock it was queued for (Nacos's LockNotificationRequest AVAILABLE).
// Every replica computes the same notifications; only the node that holds
// the connection delivers them.
type Notification struct {
	ConnID string
	Owner  string
	Kind   Kind
	Key    string
	Token  uint64
}
