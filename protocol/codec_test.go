package protocol

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	"nacos-lockd/protocol/pb"
)

func TestDecodeUnknownType(t *testing.T) {
	for _, typ := range []string{"", "FooRequest", "lockoperationrequest", "com.alibaba.nacos.api.lock.remote.request.LockOperationRequest"} {
		_, err := Decode(payload(typ, []byte(`{"headers":{}}`)))
		var ute *UnknownTypeError
		if !errors.As(err, &ute) || ute.Type != typ {
			t.Errorf("Decode(type %q) error = %v, want *UnknownTypeError{%q}", typ, err, typ)
		}
	}
}

func TestDecodeBodyErrors(t *testing.T) {
	const lockReq = "LockOperationRequest"
	tests := []struct {
		name    string
		p       *pb.Payload
		wantTyp string
	}{
		{"nil payload", nil, ""},
		{"nil metadata", &pb.Payload{Body: &anypb.Any{Value: []byte(`{}`)}}, ""},
		{"nil body", &pb.Payload{Metadata: &pb.Metadata{Type: lockReq}}, lockReq},
		{"empty body", payload(lockReq, nil), lockReq},
		{"blank body", payload(lockReq, []byte(" \n")), lockReq},
		{"not json", payload(lockReq, []byte(`not json`)), lockReq},
		{"array", payload(lockReq, []byte(`[1,2]`)), lockReq},
		{"null", payload(lockReq, []byte(`null`)), lockReq},
		{"string", payload(lockReq, []byte(`"ACQUIRE"`)), lockReq},
		{"truncated", payload(lockReq, []byte(`{"lockInstance":{"key":"a"}`)), lockReq},
		{"trailing garbage", payload(lockReq, []byte(`{"headers":{}} x`)), lockReq},
		{"two values", payload(lockReq, []byte(`{} {}`)), lockReq},
		{"lockInstance number", payload(lockReq, []byte(`{"lockInstance":5}`)), lockReq},
		{"lockInstance array", payload(lockReq, []byte(`{"lockInstance":[]}`)), lockReq},
		{"key number", payload(lockReq, []byte(`{"lockInstance":{"key":5}}`)), lockReq},
		{"expiredTime string", payload(lockReq, []byte(`{"lockInstance":{"expiredTime":"5000"}}`)), lockReq},
		{"expiredTime fraction", payload(lockReq, []byte(`{"lockInstance":{"expiredTime":1.5}}`)), lockReq},
		{"expiredTime beyond int64", payload(lockReq, []byte(`{"lockInstance":{"expiredTime":9223372036854775808}}`)), lockReq},
		{"waitTime alias string", payload(lockReq, []byte(`{"lockInstance":{"waitTime":"x"}}`)), lockReq},
		{"waiterRetry string", payload(lockReq, []byte(`{"lockInstance":{"waiterRetry":"true"}}`)), lockReq},
		{"params number", payload(lockReq, []byte(`{"lockInstance":{"params":5}}`)), lockReq},
		{"params array", payload(lockReq, []byte(`{"lockInstance":{"params":[{}]}}`)), lockReq},
		{"params string", payload(lockReq, []byte(`{"lockInstance":{"params":"{}"}}`)), lockReq},
		{"op number", payload(lockReq, []byte(`{"lockOperationEnum":1}`)), lockReq},
		{"headers array", payload(lockReq, []byte(`{"headers":[]}`)), lockReq},
		{"invalid utf-8 outside strings", payload(lockReq, []byte("{\xff}")), lockReq},
		{"result string", payload("LockOperationResponse", []byte(`{"resultCode":200,"result":"true"}`)), "LockOperationResponse"},
		{"resultCode fraction", payload("HealthCheckResponse", []byte(`{"resultCode":200.0}`)), "HealthCheckResponse"},
		{"abilityTable strings", payload("SetupAckRequest", []byte(`{"abilityTable":{"lock":"true"}}`)), "SetupAckRequest"},
		{"serverPort number", payload("ConnectResetRequest", []byte(`{"serverPort":8848}`)), "ConnectResetRequest"},
		{"requestId number", payload("ClientDetectionRequest", []byte(`{"requestId":17}`)), "ClientDetectionRequest"},
		{"negative fencing token", payload("LockOperationResponse", []byte(`{"lockResult":{"fencingToken":-1}}`)), "LockOperationResponse"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Decode(tt.p)
			var be *BodyError
			if !errors.As(err, &be) {
				t.Fatalf("Decode = %v, %v; want *BodyError", m, err)
			}
			if be.Type != tt.wantTyp {
				t.Errorf("BodyError.Type = %q, want %q", be.Type, tt.wantTyp)
			}
			if m != nil {
				t.Errorf("Decode returned %v with an error", m)
			}
			if be.Err == nil || !strings.Contains(be.Error(), be.Err.Error()) {
				t.Errorf("BodyError %q does not carry its cause %v", be.Error(), be.Err)
			}
		})
	}
}

// TestDecodeLenient covers what Java accepts and so must we: unknown
// properties, nulls for absent values, unknown enum names, both spellings of
// the wait field.
func TestDecodeLenient(t *testing.T) {
	tests := []struct {
		name string
		typ  string
		body string
		want Message
	}{
		{"unknown operation", "LockOperationRequest",
			`{"lockInstance":{"key":"k"},"lockOperationEnum":"FROBNICATE"}`,
			&LockOperationRequest{LockInstance: &LockInstance{Key: ptr("k")}, LockOperationEnum: "FROBNICATE"}},
		{"server-internal operation", "LockOperationRequest",
			`{"lockOperationEnum":"CLEANUP_CONNECTION"}`,
			&LockOperationRequest{LockOperationEnum: OpCleanupConnection}},
		{"unknown properties everywhere", "LockOperationRequest",
			`{"headers":{},"extra":{"deep":[null,1]},"lockInstance":{"key":"k","fencing":7,"lockType":"X"},"module":"not-lock","success":1}`,
			&LockOperationRequest{LockInstance: &LockInstance{Key: ptr("k"), LockType: ptr("X")}}},
		{"nulls", "LockOperationRequest",
			`{"headers":null,"requestId":null,"lockInstance":{"key":null,"expiredTime":null,"lockType":null,"params":null,"owner":null,"waitTimeMs":null,"waiterRetry":null},"lockOperationEnum":null}`,
			&LockOperationRequest{LockInstance: &LockInstance{}}},
		{"lockInstance null", "LockOperationRequest", `{"lockInstance":null}`, &LockOperationRequest{}},
		{"empty key kept", "LockOperationRequest", `{"lockInstance":{"key":""}}`,
			&LockOperationRequest{LockInstance: &LockInstance{Key: ptr("")}}},
		{"waitTime alias", "LockOperationRequest", `{"lockInstance":{"waitTime":1500}}`,
			&LockOperationRequest{LockInstance: &LockInstance{WaitTimeMs: ptr[int64](1500)}}},
		{"waitTimeMs wins over alias", "LockOperationRequest", `{"lockInstance":{"waitTime":1500,"waitTimeMs":2500}}`,
			&LockOperationRequest{LockInstance: &LockInstance{WaitTimeMs: ptr[int64](2500)}}},
		{"alias used when waitTimeMs null", "LockOperationRequest", `{"lockInstance":{"waitTimeMs":null,"waitTime":1500}}`,
			&LockOperationRequest{LockInstance: &LockInstance{WaitTimeMs: ptr[int64](1500)}}},
		{"params compacted", "LockOperationRequest", "{\"lockInstance\":{\"params\": {\n \"a\" : [1, 2],\"b\":{} }}}",
			&LockOperationRequest{LockInstance: &LockInstance{Params: json.RawMessage(`{"a":[1,2],"b":{}}`)}}},
		{"params empty object", "LockOperationRequest", `{"lockInstance":{"params":{}}}`,
			&LockOperationRequest{LockInstance: &LockInstance{Params: json.RawMessage(`{}`)}}},
		{"JSON headers mirrored", "LockOperationRequest", `{"headers":{"accessToken":"t"}}`,
			&LockOperationRequest{RequestBase: RequestBase{Headers: map[string]string{"accessToken": "t"}}}},
		{"empty object", "LockOperationRequest", `{}`, &LockOperationRequest{}},
		{"whitespace around", "HealthCheckRequest", " \r\n\t{ \"headers\" : { } }\n ", &HealthCheckRequest{}},
		{"large values", "LockOperationRequest",
			`{"lockInstance":{"expiredTime":9223372036854775807,"waitTimeMs":-9223372036854775808}}`,
			&LockOperationRequest{LockInstance: &LockInstance{ExpiredTime: ptr[int64](1<<63 - 1), WaitTimeMs: ptr[int64](-1 << 63)}}},
		{"waitPosition defaults to -1", "LockOperationResponse", `{"resultCode":200,"result":true,"lockResult":{"success":true}}`,
			&LockOperationResponse{ResponseBase: Success(), Result: true, LockResult: &LockResult{Success: true, WaitPosition: -1}}},
		{"derived properties ignored", "LockOperationResponse",
			`{"resultCode":500,"success":true,"lockResult":{"waitPosition":3,"waiting":false}}`,
			&LockOperationResponse{ResponseBase: ResponseBase{ResultCode: 500}, LockResult: &LockResult{WaitPosition: 3}}},
		{"ErrorResponse with odd resultCode", "ErrorResponse", `{"resultCode":403,"errorCode":403,"message":"no right"}`,
			&ErrorResponse{ResponseBase: ResponseBase{ResultCode: 403, ErrorCode: 403, Message: "no right"}}},
		{"PushAckRequest exception ignored", "PushAckRequest",
			`{"headers":{},"requestId":"9","success":false,"exception":{"message":"x","stackTrace":[]}}`,
			&PushAckRequest{RequestBase: RequestBase{RequestID: "9"}}},
		{"ConnectionSetupRequest empty maps", "ConnectionSetupRequest", `{"labels":{},"abilityTable":{}}`,
			&ConnectionSetupRequest{}},
		{"SetupAckRequest without table", "SetupAckRequest", `{"headers":{}}`, &SetupAckRequest{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustDecode(t, payload(tt.typ, []byte(tt.body)))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decode(%s):\n got %s\nwant %s", tt.body, dump(got), dump(tt.want))
			}
		})
	}
}

func TestDecodeIgnoresTypeURLAndMetadataHeaders(t *testing.T) {
	p := payload("LockOperationRequest", []byte(`{"headers":{},"lockOperationEnum":"RELEASE"}`))
	p.Body.TypeUrl = "type.googleapis.com/whatever"
	p.Metadata.Headers = map[string]string{"accessToken": "secret"}
	p.Metadata.ClientIp = "10.1.2.3"
	got := mustDecode(t, p)
	want := &LockOperationRequest{LockOperationEnum: OpRelease}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %s, want %s", dump(got), dump(want))
	}
}

func TestEncodeWith(t *testing.T) {
	headers := map[string]string{"app": "billing", "accessToken": "eyJhbGciOi..."}
	req := LockOperationRequest{
		LockInstance:      &LockInstance{Key: ptr("k"), ExpiredTime: ptr[int64](-1), LockType: ptr(LockTypeNacos)},
		LockOperationEnum: OpAcquire,
	}
	p, err := EncodeWith(req, "10.1.2.3", headers) // a value works as well as a pointer
	if err != nil {
		t.Fatal(err)
	}
	md := p.GetMetadata()
	if md.GetType() != "LockOperationRequest" || md.GetClientIp() != "10.1.2.3" || !reflect.DeepEqual(md.GetHeaders(), headers) {
		t.Errorf("metadata = %v", md)
	}
	headers["app"] = "changed"
	if md.GetHeaders()["app"] != "billing" {
		t.Error("EncodeWith kept a reference to the caller's headers")
	}
	if got, want := string(p.GetBody().GetValue()),
		`{"headers":{},"lockInstance":{"key":"k","expiredTime":-1,"lockType":"NACOS_LOCK"},"lockOperationEnum":"ACQUIRE","module":"lock"}`; got != want {
		t.Errorf("body = %s\nwant %s", got, want)
	}
	ptrP, err := EncodeWith(&req, "10.1.2.3", map[string]string{"app": "billing", "accessToken": "eyJhbGciOi..."})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(ptrP.GetBody().GetValue(), p.GetBody().GetValue()) {
		t.Error("encoding a pointer and a value differ")
	}
}

type fakeMessage struct{}

func (fakeMessage) TypeName() string { return "LockOperationRequest" }

func TestEncodeRejects(t *testing.T) {
	var nilReq *LockOperationRequest
	tests := []struct {
		name string
		m    Message
	}{
		{"nil", nil},
		{"typed nil pointer", nilReq},
		{"foreign type with a known name", fakeMessage{}},
		{"params not an object", &LockOperationRequest{LockInstance: &LockInstance{Params: json.RawMessage(`[1]`)}}},
		{"params not JSON", &LockOperationRequest{LockInstance: &LockInstance{Params: json.RawMessage(`{`)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p, err := Encode(tt.m); err == nil {
				t.Errorf("Encode = %v, want an error", p)
			}
		})
	}
}

func TestHeader(t *testing.T) {
	p := &pb.Payload{Metadata: &pb.Metadata{Headers: map[string]string{
		"app": "billing", "AccessToken": "upper", "accesstoken": "lower", "ak": "",
	}}}
	tests := []struct {
		name, key, want string
		ok              bool
	}{
		{"exact", "app", "billing", true},
		{"case-insensitive", "APP", "billing", true},
		{"exact beats folded", "accesstoken", "lower", true},
		{"ambiguous picks smallest key", "ACCESSTOKEN", "upper", true},
		{"empty value present", "AK", "", true},
		{"missing", "app2", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Header(p, tt.key)
			if got != tt.want || ok != tt.ok {
				t.Errorf("Header(%q) = %q, %v; want %q, %v", tt.key, got, ok, tt.want, tt.ok)
			}
		})
	}
	for _, p := range []*pb.Payload{nil, {}, {Metadata: &pb.Metadata{}}} {
		if v, ok := Header(p, "app"); ok || v != "" {
			t.Errorf("Header(%v) = %q, %v", p, v, ok)
		}
	}
}

func TestEnvelopeHelpers(t *testing.T) {
	for _, proto := range messageTypes {
		m := reflect.New(reflect.TypeOf(proto)).Interface().(Message)
		isReq := strings.HasSuffix(m.TypeName(), "Request")
		if IsRequest(m) != isReq || IsRequest(proto) != isReq {
			t.Errorf("IsRequest(%s) = %v", m.TypeName(), !isReq)
		}
		if _, ok := ResponseOf(m); ok == isReq {
			t.Errorf("ResponseOf(%s) ok = %v", m.TypeName(), ok)
		}
		// A typed nil must not panic.
		nilPtr := reflect.Zero(reflect.PointerTo(reflect.TypeOf(proto))).Interface().(Message)
		if RequestID(nilPtr) != "" {
			t.Errorf("RequestID(nil %s) not empty", m.TypeName())
		}
		if _, ok := ResponseOf(nilPtr); ok {
			t.Errorf("ResponseOf(nil %s) ok", m.TypeName())
		}
	}
	if got := RequestID(&LockNotificationRequest{RequestBase: RequestBase{RequestID: "17"}}); got != "17" {
		t.Errorf("RequestID(request) = %q", got)
	}
	if got := RequestID(LockNotificationResponse{ResponseBase: ResponseBase{RequestID: "17"}}); got != "17" {
		t.Errorf("RequestID(response) = %q", got)
	}
	if RequestID(nil) != "" || IsRequest(nil) {
		t.Error("nil message")
	}
	if base, ok := ResponseOf(&ErrorResponse{ResponseBase: Failure(CodeFailure, CodeUnregister, "x")}); !ok || base.OK() || base.ErrorCode != CodeUnregister {
		t.Errorf("ResponseOf(ErrorResponse) = %+v, %v", base, ok)
	}
	if s := Success(); !s.OK() || s.ErrorCode != 0 {
		t.Errorf("Success() = %+v", s)
	}
}

func TestNewLockOperationResponse(t *testing.T) {
	for _, ok := range []bool{true, false} {
		r := NewLockOperationResponse(Success(), LockResult{Success: ok, WaitPosition: NoWaitPosition})
		if r.Result != ok || r.LockResult == nil || r.LockResult.Success != ok {
			t.Errorf("NewLockOperationResponse(success=%v) = %+v", ok, r)
		}
	}
}

func TestWaitMs(t *testing.T) {
	var nilInst *LockInstance
	for _, tt := range []struct {
		li   *LockInstance
		want int64
	}{
		{nilInst, 0},
		{&LockInstance{}, 0},
		{&LockInstance{WaitTimeMs: ptr[int64](-1)}, -1},
		{&LockInstance{WaitTimeMs: ptr[int64](300000)}, 300000},
	} {
		if got := tt.li.WaitMs(); got != tt.want {
			t.Errorf("WaitMs(%v) = %d, want %d", tt.li, got, tt.want)
		}
	}
}

func TestLockResultWaiting(t *testing.T) {
	for pos, want := range map[int]bool{-2: false, -1: false, 0: true, 3: true} {
		if got := (LockResult{WaitPosition: pos}).Waiting(); got != want {
			t.Errorf("Waiting(%d) = %v", pos, got)
		}
	}
}
