package protocol

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// LockOp is lockOperationEnum. Decoding accepts any string, because Java
// fails the whole message on an unknown name and the gateway must still
// answer with a LockOperationResponse; validating it is the gateway's job.
type LockOp string

// Operations. Clients send only ACQUIRE and RELEASE (3.0-line) plus RENEW and
// CANCEL_WAIT (3.3-line); EXPIRE and CLEANUP_CONNECTION are server-internal in
// Nacos and must be refused when a client sends them.
const (
	OpAcquire           LockOp = "ACQUIRE"
	OpRelease           LockOp = "RELEASE"
	OpExpire            LockOp = "EXPIRE"
	OpRenew             LockOp = "RENEW"
	OpCancelWait        LockOp = "CANCEL_WAIT"
	OpCleanupConnection LockOp = "CLEANUP_CONNECTION"
)

// Lock types a Java server accepts (docs/wire-protocol.md §6.5).
const (
	LockTypeNacos        = "NACOS_LOCK" // legacy mutex, 3.0-line and the legacy 3.3 API
	LockTypeReentrant    = "REENTRANT"
	LockTypeNonReentrant = "NON_REENTRANT"
)

// LockNotificationRequest.NotificationType values.
const (
	NotificationAvailable = "AVAILABLE" // the lock is free: retry now
	NotificationTimeout   = "TIMEOUT"   // the waiter's queue entry expired
)

// NoWaitPosition is LockResult.WaitPosition when the owner is not queued; it
// is also Java's default when the property is absent.
const NoWaitPosition = -1

// LockInstance is the lock a LockOperationRequest is about. Pointer fields
// are nil when the client left the property out (or sent null): the 3.0 and
// 3.3 lines, and revisions within 3.3, differ in which properties they send
// (docs/wire-protocol.md §6.3).
type LockInstance struct {
	Key *string `json:"key,omitempty"`
	// ExpiredTime is the lease in milliseconds, not a timestamp: < 0 asks for
	// the server default.
	ExpiredTime *int64  `json:"expiredTime,omitempty"`
	LockType    *string `json:"lockType,omitempty"`
	// Params is opaque to us; nil when absent or null, else a compact JSON
	// object.
	Params json.RawMessage `json:"params,omitempty"`
	Owner  string          `json:"owner,omitempty"` // 3.3-line; empty means "the connection"
	// WaitTimeMs is how long the owner may wait in the queue; -1 = do not
	// queue. On read, "waitTime" (one 3.3 revision) is accepted as an alias;
	// "waitTimeMs" wins when both are present.
	WaitTimeMs *int64 `json:"waitTimeMs,omitempty"`
	// WaiterRetry asks for queue-head treatment. It is a primitive of the
	// 3.3 class, so 3.3 clients always send it next to waitTimeMs and 3.0
	// clients never do; MarshalJSON copies that shape by writing it whenever
	// WaitTimeMs is set (or it is true).
	WaiterRetry bool `json:"waiterRetry"`
}

// WaitMs is the effective queue wait: WaitTimeMs, 0 when absent.
func (li *LockInstance) WaitMs() int64 {
	if li == nil || li.WaitTimeMs == nil {
		return 0
	}
	return *li.WaitTimeMs
}

// lockInstanceJSON is LockInstance as it appears on the wire, in both
// directions.
type lockInstanceJSON struct {
	Key         *string         `json:"key,omitempty"`
	ExpiredTime *int64          `json:"expiredTime,omitempty"`
	LockType    *string         `json:"lockType,omitempty"`
	Params      json.RawMessage `json:"params,omitempty"`
	Owner       string          `json:"owner,omitempty"`
	WaitTimeMs  *int64          `json:"waitTimeMs,omitempty"`
	WaiterRetry *bool           `json:"waiterRetry,omitempty"`
	WaitTime    *int64          `json:"waitTime,omitempty"` // read only
}

func (li LockInstance) MarshalJSON() ([]byte, error) {
	w := lockInstanceJSON{
		Key:         li.Key,
		ExpiredTime: li.ExpiredTime,
		LockType:    li.LockType,
		Params:      li.Params,
		Owner:       li.Owner,
		WaitTimeMs:  li.WaitTimeMs,
	}
	if li.WaiterRetry || li.WaitTimeMs != nil {
		w.WaiterRetry = &li.WaiterRetry
	}
	if len(w.Params) > 0 {
		// An arbitrary RawMessage could hold anything; refuse to write what
		// the decoder would refuse to read back.
		if err := checkParams(w.Params); err != nil {
			return nil, err
		}
	}
	return marshal(w)
}

func (li *LockInstance) UnmarshalJSON(data []byte) error {
	var w lockInstanceJSON
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	params, err := readParams(w.Params)
	if err != nil {
		return err
	}
	wait := w.WaitTimeMs
	if wait == nil {
		wait = w.WaitTime
	}
	*li = LockInstance{
		Key:         w.Key,
		ExpiredTime: w.ExpiredTime,
		LockType:    w.LockType,
		Params:      params,
		Owner:       w.Owner,
		WaitTimeMs:  wait,
		WaiterRetry: w.WaiterRetry != nil && *w.WaiterRetry,
	}
	return nil
}

// readParams keeps params opaque but canonical: null means absent, anything
// but an object is refused (Java maps it to a Map and would fail too), and
// the bytes are compacted so that decode(encode(x)) == x.
func readParams(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if err := checkParams(raw); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, fmt.Errorf("params: %w", err)
	}
	return buf.Bytes(), nil
}

func checkParams(raw json.RawMessage) error {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 || t[0] != '{' || !json.Valid(t) {
		return fmt.Errorf("params: want a JSON object, got %.20q", raw)
	}
	return nil
}

// LockOperationRequest is every lock call a client makes.
type LockOperationRequest struct {
	RequestBase
	LockInstance      *LockInstance `json:"lockInstance,omitempty"`
	LockOperationEnum LockOp        `json:"lockOperationEnum,omitempty"`
}

// LockResult is the 3.3-line outcome of a lock operation; 3.0-line clients
// never read it.
type LockResult struct {
	Success bool `json:"success"`
	// ReentrantCount is the hold count after the operation. A 3.3 client
	// starts its watchdog only when an acquire returns 1.
	ReentrantCount int `json:"reentrantCount"`
	// WaitPosition is the 0-based queue position, NoWaitPosition if not
	// queued.
	WaitPosition int    `json:"waitPosition"`
	ErrorMessage string `json:"errorMessage,omitempty"`
	// FencingToken is ours, not Nacos': Java clients ignore it.
	FencingToken uint64 `json:"fencingToken,omitempty"`
}

// Waiting is the derived "waiting" property.
func (r LockResult) Waiting() bool { return r.WaitPosition >= 0 }

func (r LockResult) MarshalJSON() ([]byte, error) {
	type wire LockResult
	return marshalWith(wire(r), "waiting", r.Waiting())
}

func (r *LockResult) UnmarshalJSON(data []byte) error {
	type wire LockResult
	w := wire{WaitPosition: NoWaitPosition} // Java's field initialiser
	if err := json.Unmarshal(data, &w); err != nil {
		return err
	}
	*r = LockResult(w)
	return nil
}

// LockOperationResponse answers every LockOperationRequest, failures
// included: a refusal is 200 with Result false, a bad request 500.
type LockOperationResponse struct {
	ResponseBase
	// Result is all a 3.0-line client reads; it must equal LockResult.Success.
	Result     bool        `json:"result"`
	LockResult *LockResult `json:"lockResult,omitempty"`
}

// NewLockOperationResponse builds a response carrying both result and
// lockResult, which every response we send must (docs/wire-protocol.md §6.6):
// 3.0-line clients read only result, 3.3-line clients prefer lockResult and
// without it see reentrantCount 0, which disables their watchdog.
func NewLockOperationResponse(base ResponseBase, res LockResult) *LockOperationResponse {
	// One allocation for both: every lock call answers with one.
	a := &struct {
		r  LockOperationResponse
		lr LockResult
	}{lr: res}
	a.r = LockOperationResponse{ResponseBase: base, Result: res.Success, LockResult: &a.lr}
	return &a.r
}

// LockNotificationRequest is pushed to a queued 3.3-line owner. Never push
// it to a 3.0-line client: it cannot parse the type.
type LockNotificationRequest struct {
	RequestBase
	LockKey          string `json:"lockKey,omitempty"`
	LockType         string `json:"lockType,omitempty"`
	Owner            string `json:"owner,omitempty"` // the waiter's owner, exactly
	NotificationType string `json:"notificationType,omitempty"`
}

// LockNotificationResponse is the client's reply to a notification; it is
// sent even when nothing was waiting.
type LockNotificationResponse struct {
	ResponseBase
}

func (LockOperationRequest) TypeName() string     { return "LockOperationRequest" }
func (LockOperationResponse) TypeName() string    { return "LockOperationResponse" }
func (LockNotificationRequest) TypeName() string  { return "LockNotificationRequest" }
func (LockNotificationResponse) TypeName() string { return "LockNotificationResponse" }

func (r LockOperationRequest) MarshalJSON() ([]byte, error) {
	type wire LockOperationRequest
	r.RequestBase = r.forWire()
	return marshalWith(wire(r), "module", moduleLock)
}

func (r LockOperationResponse) MarshalJSON() ([]byte, error) {
	type wire LockOperationResponse
	return marshalWith(wire(r), "success", r.OK())
}

func (r LockNotificationRequest) MarshalJSON() ([]byte, error) {
	type wire LockNotificationRequest
	r.RequestBase = r.forWire()
	return marshalWith(wire(r), "module", moduleLock)
}

func (r LockNotificationResponse) MarshalJSON() ([]byte, error) {
	type wire LockNotificationResponse
	return marshalWith(wire(r), "success", r.OK())
}
