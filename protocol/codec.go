package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"

	"google.golang.org/protobuf/types/known/anypb"

	"nacos-lockd/protocol/pb"
)

// messageTypes lists one value of every type the codec knows; metadata.type
// is looked up here.
var messageTypes = []Message{
	ServerCheckRequest{}, ServerCheckResponse{},
	HealthCheckRequest{}, HealthCheckResponse{},
	ConnectionSetupRequest{},
	SetupAckRequest{}, SetupAckResponse{},
	ClientDetectionRequest{}, ClientDetectionResponse{},
	ConnectResetRequest{}, ConnectResetResponse{},
	ErrorResponse{},
	LockOperationRequest{}, LockOperationResponse{},
	LockNotificationRequest{}, LockNotificationResponse{},
	ServerLoaderInfoRequest{}, ServerLoaderInfoResponse{},
	ServerReloadRequest{}, ServerReloadResponse{},
	PushAckRequest{},
}

var registry = func() map[string]reflect.Type {
	r := make(map[string]reflect.Type, len(messageTypes))
	for _, m := range messageTypes {
		r[m.TypeName()] = reflect.TypeOf(m)
	}
	return r
}()

// UnknownTypeError is a metadata.type the codec does not know. Java servers
// answer it with ErrorResponse 302 (CodeNoHandler).
type UnknownTypeError struct {
	Type string
}

func (e *UnknownTypeError) Error() string {
	return fmt.Sprintf("unknown payload type %q", e.Type)
}

// BodyError is a body that is not valid JSON for its known Type: not JSON,
// not an object, wrong property types, trailing data. Type is "" when the
// payload or its metadata is missing. The gateway keeps Type so that it can
// still answer a LockOperationRequest with a LockOperationResponse.
type BodyError struct {
	Type string
	Err  error
}

func (e *BodyError) Error() string {
	if e.Type == "" {
		return fmt.Sprintf("invalid payload: %v", e.Err)
	}
	return fmt.Sprintf("invalid %s body: %v", e.Type, e.Err)
}

func (e *BodyError) Unwrap() error { return e.Err }

var (
	errNoMetadata = errors.New("no metadata")
	errNotObject  = errors.New("body is not a JSON object")
)

// Encode builds the Payload for m, as a server sends it: no clientIp, no
// headers.
func Encode(m Message) (*pb.Payload, error) {
	return EncodeWith(m, "", nil)
}

// EncodeWith builds the Payload for m with the metadata a Java client adds
// to its requests. headers is copied.
func EncodeWith(m Message, clientIP string, headers map[string]string) (*pb.Payload, error) {
	if r, ok := m.(*LockOperationResponse); ok && r != nil && clientIP == "" && len(headers) == 0 {
		// The reply to every lock call: no reflection on this path.
		body, err := appendLockOperationResponse(make([]byte, 0, 192), r)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", r.TypeName(), err)
		}
		return lockPayload(r.TypeName(), "", nil, body), nil
	}
	if r, ok := m.(*LockOperationRequest); ok && r != nil && (r.LockInstance == nil || len(r.LockInstance.Params) == 0) {
		// Every lock call a client makes: no reflection on this path either.
		body, err := appendLockOperationRequest(make([]byte, 0, 256), r)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", r.TypeName(), err)
		}
		return lockPayload(r.TypeName(), clientIP, headers, body), nil
	}
	if r, ok := m.(*LockNotificationRequest); ok && r != nil {
		// Pushed at every hand-off.
		body, err := appendLockNotificationRequest(make([]byte, 0, 192), r)
		if err != nil {
			return nil, fmt.Errorf("encode %s: %w", r.TypeName(), err)
		}
		return lockPayload(r.TypeName(), clientIP, headers, body), nil
	}
	if isNil(m) {
		return nil, errors.New("encode: nil message")
	}
	if t, ok := registry[m.TypeName()]; !ok || reflect.Indirect(reflect.ValueOf(m)).Type() != t {
		return nil, fmt.Errorf("encode %T: not a Nacos message type", m)
	}
	body, err := marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", m.TypeName(), err)
	}
	var hs map[string]string
	if len(headers) > 0 {
		hs = maps.Clone(headers)
	}
	return &pb.Payload{
		Metadata: &pb.Metadata{Type: m.TypeName(), ClientIp: clientIP, Headers: hs},
		// Java never sets or reads type_url; anypb.New would set one.
		Body: &anypb.Any{Value: body},
	}, nil
}

// lockPayload builds the Payload of a lock call or its reply, the three
// messages in one allocation. headers is copied.
func lockPayload(typ, clientIP string, headers map[string]string, body []byte) *pb.Payload {
	a := &struct {
		p  pb.Payload
		md pb.Metadata
		b  anypb.Any
	}{}
	a.md.Type, a.md.ClientIp, a.b.Value = typ, clientIP, body
	if len(headers) > 0 {
		a.md.Headers = maps.Clone(headers)
	}
	a.p.Metadata, a.p.Body = &a.md, &a.b
	return &a.p
}

// Decode parses p into the type named by metadata.type and returns a
// pointer to it (*LockOperationRequest, ...). Errors are *UnknownTypeError
// or *BodyError. Unknown JSON properties are ignored, like Java does, and
// empty JSON objects in map fields decode to nil maps. metadata.headers is
// not merged into the message: use Header.
//
// A LockOperationRequest, the body of every lock call, is read by a
// hand-written decoder that matches property names exactly, as Jackson
// does; the other types go through encoding/json, which matches them
// case-insensitively. A LockOperationResponse, the reply to every lock
// call, takes a hand-written fast path where it gives encoding/json's
// result, and encoding/json otherwise.
func Decode(p *pb.Payload) (Message, error) {
	md := p.GetMetadata()
	if md == nil {
		return nil, &BodyError{Err: errNoMetadata}
	}
	if typ := md.GetType(); typ == (LockOperationRequest{}).TypeName() {
		m, err := decodeLockOperationRequest(p.GetBody().GetValue())
		if err != nil {
			return nil, &BodyError{Type: typ, Err: err}
		}
		return m, nil
	}
	switch md.GetType() {
	case (LockOperationResponse{}).TypeName():
		if m, ok := decodeLockOperationResponse(p.GetBody().GetValue()); ok {
			return m, nil
		}
	case (LockNotificationResponse{}).TypeName():
		if m, ok := decodeLockNotificationResponse(p.GetBody().GetValue()); ok {
			return m, nil
		}
	}
	return decodeReflect(md.GetType(), p.GetBody().GetValue())
}

// decodeReflect decodes body into the registered type typ with
// encoding/json. It is Decode for every type but LockOperationRequest, and
// the tests' reference for that one.
func decodeReflect(typ string, body []byte) (Message, error) {
	t, ok := registry[typ]
	if !ok {
		return nil, &UnknownTypeError{Type: typ}
	}
	v := reflect.New(t)
	if err := unmarshalObject(body, v.Interface()); err != nil {
		return nil, &BodyError{Type: typ, Err: err}
	}
	emptyMapsToNil(v.Elem())
	return v.Interface().(Message), nil
}

// Header returns a metadata header. Java looks headers up
// case-insensitively; an exact match wins, and among keys that differ only
// in case the smallest is taken, so the answer never depends on map order.
func Header(p *pb.Payload, name string) (string, bool) {
	h := p.GetMetadata().GetHeaders()
	if v, ok := h[name]; ok {
		return v, true
	}
	var key, val string
	found := false
	for k, v := range h {
		if strings.EqualFold(k, name) && (!found || k < key) {
			key, val, found = k, v, true
		}
	}
	return val, found
}

// unmarshalObject is json.Unmarshal restricted to a JSON object: Unmarshal
// would accept "null" as a no-op, but Java fails on a null payload.
func unmarshalObject(data []byte, v any) error {
	t := bytes.TrimLeft(data, " \t\r\n")
	if len(t) > 0 && t[0] != '{' {
		return errNotObject
	}
	return json.Unmarshal(data, v)
}

// marshal is json.Marshal without HTML escaping: Jackson writes <, > and &
// as they are, and so do we.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// marshalWith marshals the struct v and appends the property name:value,
// the way Jackson serialises a getter that has no field (module, success,
// waiting).
func marshalWith(v any, name string, value any) ([]byte, error) {
	obj, err := marshal(v)
	if err != nil {
		return nil, err
	}
	val, err := marshal(value)
	if err != nil {
		return nil, err
	}
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return nil, fmt.Errorf("marshal %T: not a JSON object", v)
	}
	out := make([]byte, 0, len(obj)+len(name)+len(val)+4)
	out = append(out, obj[:len(obj)-1]...)
	if len(obj) > 2 {
		out = append(out, ',')
	}
	out = append(out, '"')
	out = append(out, name...)
	out = append(out, '"', ':')
	out = append(out, val...)
	return append(out, '}'), nil
}

// emptyMapsToNil makes map fields canonical after decoding: a nil map is
// written as {} (or omitted), so without this decode(encode(x)) would not
// give back x.
func emptyMapsToNil(v reflect.Value) {
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case !f.CanSet():
		case f.Kind() == reflect.Map && f.Len() == 0:
			f.SetZero()
		case f.Kind() == reflect.Struct:
			emptyMapsToNil(f)
		}
	}
}
