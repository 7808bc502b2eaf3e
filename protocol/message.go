package protocol

import "reflect"

// Message is every Nacos payload body type.
//
// Every type implements it with value receivers, so both T and *T are
// Messages; Decode always returns *T.
type Message interface {
	// TypeName returns the Java simple class name, which travels as
	// metadata.type, e.g. "LockOperationRequest".
	TypeName() string
}

// Envelope result codes (resultCode). Java's envelope enum has only these
// two; an ErrorResponse built from an exception may carry other values
// (docs/wire-protocol.md §5.1), and clients treat every non-200 alike.
const (
	CodeSuccess = 200
	CodeFailure = 500
)

// Nacos error codes (errorCode) that a lock server sends or a client reacts
// to (docs/wire-protocol.md §5.2).
const (
	CodeInvalidServerStatus = 300  // server still starting
	CodeUnregister          = 301  // unary call on an unregistered connection: the client reconnects
	CodeNoHandler           = 302  // unknown metadata.type
	CodeNoRight             = 403  // authentication or authorisation failure
	CodeBadGateway          = 502  // unparseable request
	CodeOverThreshold       = 503  // rate limited
	CodeClientError         = -500 // the client's push handler failed
)

// Module values: the derived "module" property every request carries.
const (
	moduleInternal = "internal" // connection-level types
	moduleLock     = "lock"
)

// RequestBase is embedded in every request type.
//
// The Java client empties its JSON "headers" before sending and carries the
// real headers in metadata.headers (read those with Header); Headers here
// mirrors only the JSON property. It is written as {} when nil, and an
// empty object decodes to nil.
type RequestBase struct {
	Headers   map[string]string `json:"headers"`
	RequestID string            `json:"requestId,omitempty"`
}

// ResponseBase is embedded in every response type.
type ResponseBase struct {
	ResultCode int    `json:"resultCode"`
	ErrorCode  int    `json:"errorCode"`
	Message    string `json:"message,omitempty"`
	RequestID  string `json:"requestId,omitempty"`
}

// requestBase and responseBase are promoted into every request and response
// type; IsRequest and RequestID find the envelope through them.
func (b RequestBase) requestBase() RequestBase    { return b }
func (b ResponseBase) responseBase() ResponseBase { return b }

// forWire returns b as it goes on the wire: Java's headers map is never null.
func (b RequestBase) forWire() RequestBase {
	if b.Headers == nil {
		b.Headers = map[string]string{}
	}
	return b
}

// OK reports whether the response is a success; it is the derived "success"
// property, and the only thing the Java client checks before the type.
func (b ResponseBase) OK() bool { return b.ResultCode == CodeSuccess }

// Success is the envelope of a successful response.
func Success() ResponseBase { return ResponseBase{ResultCode: CodeSuccess} }

// Failure is the envelope of a failed response. code is the resultCode
// (CodeFailure unless mirroring a Java exception), errCode the Nacos error
// code (0 for lock business failures, see docs/wire-protocol.md §5.2).
func Failure(code, errCode int, msg string) ResponseBase {
	return ResponseBase{ResultCode: code, ErrorCode: errCode, Message: msg}
}

type requester interface{ requestBase() RequestBase }
type responder interface{ responseBase() ResponseBase }

// IsRequest reports whether m is a request type (false for responses).
func IsRequest(m Message) bool {
	_, ok := m.(requester)
	return ok
}

// RequestID returns the requestId of a request or response: the key that
// pairs a server push with the client's reply on the stream.
func RequestID(m Message) string {
	if isNil(m) {
		return ""
	}
	switch m := m.(type) {
	case requester:
		return m.requestBase().RequestID
	case responder:
		return m.responseBase().RequestID
	}
	return ""
}

// ResponseOf returns the envelope of a response type; ok is false for
// requests.
func ResponseOf(m Message) (base ResponseBase, ok bool) {
	r, ok := m.(responder)
	if !ok || isNil(m) {
		return ResponseBase{}, false
	}
	return r.responseBase(), true
}

// isNil catches a typed nil pointer, on which the value-receiver methods
// would panic.
func isNil(m Message) bool {
	if m == nil {
		return true
	}
	v := reflect.ValueOf(m)
	return v.Kind() == reflect.Pointer && v.IsNil()
}
