package protocol

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/anypb"

	"nacos-lockd/protocol/pb"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the encoder")

// A codecCase is one Go value and its files in testdata, named
// <TypeName>.<variant>:
//
//   - <name>.golden is what Encode writes for msg (rewritten by -update).
//   - java/<name>.json, when java is set, is the body as a Java client or
//     server sends it (hand-written from docs/wire-protocol.md, never rewritten);
//     Decode must turn it into msg. Unless reshaped is set, re-encoding msg
//     must also give back that JSON property for property, derived
//     properties included, i.e. we write each message the way Java does.
type codecCase struct {
	name     string
	msg      Message
	java     bool
	reshaped bool
}

const owner41 = "3f0c1a52-8d7e-4b1a-9c33-5e2f6a7b8c90:41"

func ptr[T any](v T) *T { return &v }

var codecCases = []codecCase{
	// Connection level.
	{name: "ServerCheckRequest.sdk", java: true, msg: &ServerCheckRequest{}},
	{name: "ServerCheckResponse.java-server", java: true, msg: &ServerCheckResponse{
		ResponseBase: Success(), ConnectionID: "1717000000000_10.1.2.3_53122", SupportAbilityNegotiation: true}},
	{name: "HealthCheckRequest.sdk", java: true, msg: &HealthCheckRequest{}},
	{name: "HealthCheckResponse.java-server", java: true, msg: &HealthCheckResponse{ResponseBase: Success()}},
	{name: "ConnectionSetupRequest.v31", java: true, msg: &ConnectionSetupRequest{
		ClientVersion: "Nacos-Java-Client:v3.1.0",
		Labels:        map[string]string{"source": "sdk", "module": "lock", "AppName": "billing", "tls.enable": "false"},
		AbilityTable:  map[string]bool{"fuzzyWatch": true, "lock": true, "mcp": true},
	}},
	{name: "ConnectionSetupRequest.v300-tls", java: true, msg: &ConnectionSetupRequest{
		ClientVersion: "Nacos-Java-Client:v3.0.0",
		Labels:        map[string]string{"source": "sdk", "module": "lock", "AppName": "unknown", "tls.enable": "true"},
		AbilityTable:  map[string]bool{"fuzzyWatch": true, "lock": true},
	}},
	{name: "ConnectionSetupRequest.minimal", msg: &ConnectionSetupRequest{ClientVersion: "nacos-lockd-loadtool", Tenant: "public"}},
	{name: "SetupAckRequest.lock-only", java: true, msg: &SetupAckRequest{AbilityTable: map[string]bool{"lock": true}}},
	{name: "SetupAckRequest.nacos31-server", java: true, msg: &SetupAckRequest{AbilityTable: map[string]bool{
		"supportPersistentInstanceByGrpc": true, "fuzzyWatch": true, "lock": true, "mcp": true}}},
	{name: "SetupAckRequest.nil-table", msg: &SetupAckRequest{}},
	{name: "SetupAckResponse.sdk", java: true, msg: &SetupAckResponse{ResponseBase: Success()}},
	{name: "ClientDetectionRequest.push", java: true, msg: &ClientDetectionRequest{RequestBase: RequestBase{RequestID: "23"}}},
	{name: "ClientDetectionResponse.reply", java: true, msg: &ClientDetectionResponse{
		ResponseBase: ResponseBase{ResultCode: 200, RequestID: "23"}}},
	{name: "ConnectResetRequest.push", java: true, msg: &ConnectResetRequest{
		RequestBase: RequestBase{RequestID: "7"}, ServerIP: "10.1.0.9", ServerPort: "8848"}},
	{name: "ConnectResetRequest.no-target", java: true, msg: &ConnectResetRequest{RequestBase: RequestBase{RequestID: "8"}}},
	{name: "ConnectResetResponse.reply", java: true, msg: &ConnectResetResponse{
		ResponseBase: ResponseBase{ResultCode: 200, RequestID: "7"}}},
	{name: "ErrorResponse.unregistered", java: true, msg: &ErrorResponse{
		ResponseBase: Failure(CodeFailure, CodeUnregister, "Connection is unregistered.")}},
	{name: "ErrorResponse.client-handler", java: true, msg: &ErrorResponse{ResponseBase: ResponseBase{
		ResultCode: 500, ErrorCode: CodeClientError, Message: "Handle server request error", RequestID: "17"}}},
	{name: "ErrorResponse.no-handler", msg: &ErrorResponse{
		ResponseBase: Failure(CodeFailure, CodeNoHandler, "Unknown payload type:FooRequest <v2> & co")}},
	{name: "ServerLoaderInfoRequest.sdk", java: true, msg: &ServerLoaderInfoRequest{}},
	{name: "ServerLoaderInfoResponse.java-server", java: true, msg: &ServerLoaderInfoResponse{
		ResponseBase: Success(), Address: "10.1.0.9:8848", LoaderMetrics: map[string]string{"conCount": "12", "load": "0.45"}}},
	{name: "ServerLoaderInfoResponse.nil-metrics", msg: &ServerLoaderInfoResponse{ResponseBase: Success()}},
	{name: "ServerReloadRequest.sdk", java: true, msg: &ServerReloadRequest{ReloadCount: 20, ReloadServer: "10.1.0.9:8848"}},
	{name: "ServerReloadResponse.java-server", java: true, msg: &ServerReloadResponse{ResponseBase: Success()}},
	{name: "PushAckRequest.sdk", java: true, msg: &PushAckRequest{RequestBase: RequestBase{RequestID: "5"}, Success: true}},

	// LockOperationRequest, 3.0-line (NacosLockService / NLock).
	{name: "LockOperationRequest.v30-acquire-lease", java: true, msg: &LockOperationRequest{
		LockInstance:      &LockInstance{Key: ptr("invoice-2024-001"), ExpiredTime: ptr[int64](5000), LockType: ptr(LockTypeNacos)},
		LockOperationEnum: OpAcquire,
	}},
	{name: "LockOperationRequest.v30-acquire-params", java: true, msg: &LockOperationRequest{
		LockInstance: &LockInstance{
			Key: ptr("orders/eu-west"), ExpiredTime: ptr[int64](-1), LockType: ptr(LockTypeNacos),
			Params: json.RawMessage(`{"tenant":"t1","retries":3,"nested":{"tags":["a","b"],"on":true}}`),
		},
		LockOperationEnum: OpAcquire,
	}},
	{name: "LockOperationRequest.v30-release-no-expiry", java: true, msg: &LockOperationRequest{
		LockInstance:      &LockInstance{Key: ptr("invoice-2024-001"), LockType: ptr(LockTypeNacos)},
		LockOperationEnum: OpRelease,
	}},
	{name: "LockOperationRequest.v30-release-params", java: true, msg: &LockOperationRequest{
		LockInstance: &LockInstance{Key: ptr("orders/eu-west"), ExpiredTime: ptr[int64](-1), LockType: ptr(LockTypeNacos),
			Params: json.RawMessage(`{"tenant":"t1"}`)},
		LockOperationEnum: OpRelease,
	}},

	// LockOperationRequest, 3.3-line.
	{name: "LockOperationRequest.v33-lock-acquire", java: true, msg: &LockOperationRequest{
		LockInstance: &LockInstance{Key: ptr("invoice-2024-001"), ExpiredTime: ptr[int64](-1), LockType: ptr(LockTypeReentrant),
			Owner: owner41, WaitTimeMs: ptr[int64](300000)},
		LockOperationEnum: OpAcquire,
	}},
	{name: "LockOperationRequest.v33-lock-retry", java: true, msg: &LockOperationRequest{
		LockInstance: &LockInstance{Key: ptr("invoice-2024-001"), ExpiredTime: ptr[int64](-1), LockType: ptr(LockTypeReentrant),
			Owner: owner41, WaitTimeMs: ptr[int64](300000), WaiterRetry: true},
		LockOperationEnum: OpAcquire,
	}},
	{name: "LockOperationRequest.v33-trylock-acquire", java: true, msg: &LockOperationRequest{
		LockInstance: &LockInstance{Key: ptr("invoice-2024-001"), ExpiredTime: ptr[int64](-1), LockType: ptr(LockTypeNonReentrant),
			Owner: "3f0c1a52-8d7e-4b1a-9c33-5e2f6a7b8c90:57", WaitTimeMs: ptr[int64](-1)},
		LockOperationEnum: OpAcquire,
	}},
	{name: "LockOperationRequest.v33-legacy-acquire", java: true, msg: &LockOperationRequest{
		LockInstance: &LockInstance{Key: ptr("invoice-2024-001"), ExpiredTime: ptr[int64](5000), LockType: ptr(LockTypeNacos),
			WaitTimeMs: ptr[int64](-1)},
		LockOperationEnum: OpAcquire,
	}},
	{name: "LockOperationRequest.v33-renew", java: true, msg: &LockOperationRequest{
		LockInstance: &LockInstance{Key: ptr("invoice-2024-001"), ExpiredTime: ptr[int64](-1), LockType: ptr(LockTypeReentrant),
			Owner: owner41, WaitTimeMs: ptr[int64](300000)},
		LockOperationEnum: OpRenew,
	}},
	{name: "LockOperationRequest.v33-cancel-wait", java: true, msg: &LockOperationRequest{
		LockInstance: &LockInstance{Key: ptr("invoice-2024-001"), LockType: ptr(LockTypeReentrant),
			Owner: owner41, WaitTimeMs: ptr[int64](-1)},
		LockOperationEnum: OpCancelWait,
	}},
	{name: "LockOperationRequest.v33-cancel-wait-primitive", java: true, msg: &LockOperationRequest{
		LockInstance: &LockInstance{Key: ptr("invoice-2024-001"), ExpiredTime: ptr[int64](0), LockType: ptr(LockTypeReentrant),
			Owner: owner41, WaitTimeMs: ptr[int64](-1)},
		LockOperationEnum: OpCancelWait,
	}},
	{name: "LockOperationRequest.v33-unlock-release", java: true, msg: &LockOperationRequest{
		LockInstance: &LockInstance{Key: ptr("invoice-2024-001"), ExpiredTime: ptr[int64](0), LockType: ptr(LockTypeReentrant),
			Owner: owner41, WaitTimeMs: ptr[int64](-1)},
		LockOperationEnum: OpRelease,
	}},
	// One upstream revision of 3.3 calls the field waitTime.
	{name: "LockOperationRequest.v33-wait-time-alias", java: true, reshaped: true, msg: &LockOperationRequest{
		LockInstance: &LockInstance{Key: ptr("invoice-2024-001"), ExpiredTime: ptr[int64](-1), LockType: ptr(LockTypeReentrant),
			Owner: owner41, WaitTimeMs: ptr[int64](300000)},
		LockOperationEnum: OpAcquire,
	}},
	{name: "LockOperationRequest.expired-time-null", java: true, reshaped: true, msg: &LockOperationRequest{
		LockInstance:      &LockInstance{Key: ptr("invoice-2024-001"), LockType: ptr(LockTypeNacos)},
		LockOperationEnum: OpRelease,
	}},
	// What our own test clients may send.
	{name: "LockOperationRequest.html-and-json-headers", msg: &LockOperationRequest{
		RequestBase:       RequestBase{Headers: map[string]string{"app": "x"}},
		LockInstance:      &LockInstance{Key: ptr("a<b>&c\u2028"), WaiterRetry: true},
		LockOperationEnum: "FROBNICATE",
	}},
	{name: "LockOperationRequest.empty", msg: &LockOperationRequest{}},

	// LockOperationResponse: docs/wire-protocol.md §6.9 and §7.3 as Java servers
	// write them, then what we send.
	{name: "LockOperationResponse.success", java: true, msg: &LockOperationResponse{
		ResponseBase: Success(), Result: true,
		LockResult: &LockResult{Success: true, ReentrantCount: 1, WaitPosition: NoWaitPosition}}},
	{name: "LockOperationResponse.refused", java: true, msg: &LockOperationResponse{
		ResponseBase: Success(),
		LockResult:   &LockResult{WaitPosition: NoWaitPosition, ErrorMessage: "Lock is held by another owner"}}},
	{name: "LockOperationResponse.queued", java: true, msg: &LockOperationResponse{
		ResponseBase: Success(), LockResult: &LockResult{WaitPosition: 2}}},
	{name: "LockOperationResponse.rejected", java: true, msg: &LockOperationResponse{
		ResponseBase: Failure(CodeFailure, 0, "Lock expiredTime must be non-zero for ACQUIRE")}},
	{name: "LockOperationResponse.renew-result-only", java: true, msg: &LockOperationResponse{ResponseBase: Success(), Result: true}},
	{name: "LockOperationResponse.auth-failure", java: true, msg: &LockOperationResponse{
		ResponseBase: Failure(CodeFailure, CodeNoRight, "user not found or token expired")}},
	{name: "LockOperationResponse.ours-granted", msg: NewLockOperationResponse(Success(),
		LockResult{Success: true, ReentrantCount: 1, WaitPosition: NoWaitPosition, FencingToken: 184467})},
	{name: "LockOperationResponse.ours-rejected", msg: NewLockOperationResponse(
		Failure(CodeFailure, 0, `lockInstance.expiredTime must be non-zero for ACQUIRE, got 0`),
		LockResult{WaitPosition: NoWaitPosition, ErrorMessage: `lockInstance.expiredTime must be non-zero for ACQUIRE, got 0`})},

	{name: "LockNotificationRequest.available", java: true, msg: &LockNotificationRequest{
		RequestBase: RequestBase{RequestID: "1042"}, LockKey: "invoice-2024-001", LockType: LockTypeReentrant,
		Owner: owner41, NotificationType: NotificationAvailable}},
	{name: "LockNotificationRequest.timeout", java: true, msg: &LockNotificationRequest{
		RequestBase: RequestBase{RequestID: "1043"}, LockKey: "invoice-2024-001", LockType: LockTypeReentrant,
		Owner: owner41, NotificationType: NotificationTimeout}},
	{name: "LockNotificationResponse.reply", java: true, msg: &LockNotificationResponse{
		ResponseBase: ResponseBase{ResultCode: 200, RequestID: "1042"}}},
}

func typeOfCase(name string) string { return strings.SplitN(name, ".", 2)[0] }

func readFile(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func payload(typ string, body []byte) *pb.Payload {
	return &pb.Payload{Metadata: &pb.Metadata{Type: typ}, Body: &anypb.Any{Value: body}}
}

func mustEncode(tb testing.TB, m Message) *pb.Payload {
	tb.Helper()
	p, err := Encode(m)
	if err != nil {
		tb.Fatalf("Encode(%#v): %v", m, err)
	}
	return p
}

func mustDecode(tb testing.TB, p *pb.Payload) Message {
	tb.Helper()
	m, err := Decode(p)
	if err != nil {
		tb.Fatalf("Decode(%s, %s): %v", p.GetMetadata().GetType(), p.GetBody().GetValue(), err)
	}
	return m
}

func TestDecodeJava(t *testing.T) {
	for _, tc := range codecCases {
		if !tc.java {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			body := readFile(t, filepath.Join("testdata", "java", tc.name+".json"))
			got := mustDecode(t, payload(typeOfCase(tc.name), body))
			if !reflect.DeepEqual(got, tc.msg) {
				t.Errorf("Decode:\n got %s\nwant %s", dump(got), dump(tc.msg))
			}
		})
	}
}

func TestEncodeGolden(t *testing.T) {
	for _, tc := range codecCases {
		t.Run(tc.name, func(t *testing.T) {
			p := mustEncode(t, tc.msg)
			got := append(slices.Clip(p.GetBody().GetValue()), '\n')
			path := filepath.Join("testdata", tc.name+".golden")
			if *update {
				if err := os.WriteFile(path, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if want := readFile(t, path); !bytes.Equal(got, want) {
				t.Errorf("Encode body:\n got %s want %s(run go test ./protocol -update and review the diff)", got, want)
			}
		})
	}
}

// TestEncodeLikeJava holds the encoder to Java's shape: same properties,
// derived ones included, no extra ones, no nulls.
func TestEncodeLikeJava(t *testing.T) {
	for _, tc := range codecCases {
		if !tc.java || tc.reshaped {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			java := readFile(t, filepath.Join("testdata", "java", tc.name+".json"))
			ours := mustEncode(t, tc.msg).GetBody().GetValue()
			if !reflect.DeepEqual(genericJSON(t, ours), genericJSON(t, java)) {
				t.Errorf("encoded shape differs from Java's:\n ours %s\njava %s", ours, java)
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	for _, tc := range codecCases {
		t.Run(tc.name, func(t *testing.T) {
			got := mustDecode(t, mustEncode(t, tc.msg))
			if !reflect.DeepEqual(got, tc.msg) {
				t.Errorf("Decode(Encode(x)):\n got %s\nwant %s", dump(got), dump(tc.msg))
			}
		})
	}
}

// TestCasesCoverEveryType makes adding a message type without goldens, or
// leaving a stray file in testdata, fail.
func TestCasesCoverEveryType(t *testing.T) {
	javaTypes, encTypes := map[string]bool{}, map[string]bool{}
	wantFiles := map[string]bool{}
	for _, tc := range codecCases {
		typ := typeOfCase(tc.name)
		if tc.msg.TypeName() != typ {
			t.Errorf("case %s holds a %s", tc.name, tc.msg.TypeName())
		}
		if wantFiles[tc.name+".golden"] {
			t.Errorf("duplicate case %s", tc.name)
		}
		encTypes[typ] = true
		wantFiles[tc.name+".golden"] = true
		if tc.java {
			javaTypes[typ] = true
			wantFiles[filepath.Join("java", tc.name+".json")] = true
		}
	}
	for _, m := range messageTypes {
		if !javaTypes[m.TypeName()] || !encTypes[m.TypeName()] {
			t.Errorf("%s: want a decode (java) case and an encode case", m.TypeName())
		}
	}
	var files []string
	for _, pattern := range []string{"testdata/*.golden", "testdata/java/*.json"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	for _, f := range files {
		rel, _ := filepath.Rel("testdata", f)
		if !wantFiles[rel] {
			t.Errorf("%s belongs to no case in codecCases", f)
		}
		delete(wantFiles, rel)
	}
	if !*update {
		for f := range wantFiles {
			t.Errorf("testdata/%s is missing", f)
		}
	}
}

func TestEncodedPayloads(t *testing.T) {
	for _, tc := range codecCases {
		p := mustEncode(t, tc.msg)
		md := p.GetMetadata()
		if md.GetType() != typeOfCase(tc.name) || md.GetClientIp() != "" || md.GetHeaders() != nil {
			t.Errorf("%s: metadata %v", tc.name, md)
		}
		if p.GetBody().GetTypeUrl() != "" {
			t.Errorf("%s: type_url %q, want empty", tc.name, p.GetBody().GetTypeUrl())
		}
		body := p.GetBody().GetValue()
		if path, ok := findNull(genericJSON(t, body), "$"); ok {
			t.Errorf("%s: null at %s in %s", tc.name, path, body)
		}
		// Nothing in the cases has a string "null" either, so a plain search
		// also catches nulls the JSON walk could miss.
		if bytes.Contains(body, []byte("null")) {
			t.Errorf("%s: body contains null: %s", tc.name, body)
		}
		derived := `"success":`
		if IsRequest(tc.msg) {
			derived = `"module":`
		}
		if !bytes.Contains(body, []byte(derived)) {
			t.Errorf("%s: no derived %s in %s", tc.name, derived, body)
		}
	}
}

// genericJSON decodes b into maps and slices, keeping numbers exact.
func genericJSON(tb testing.TB, b []byte) any {
	tb.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		tb.Fatalf("not JSON: %v: %s", err, b)
	}
	if dec.More() {
		tb.Fatalf("trailing data after JSON value: %s", b)
	}
	return v
}

// findNull returns the path of the first JSON null in v.
func findNull(v any, path string) (string, bool) {
	switch v := v.(type) {
	case nil:
		return path, true
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(v)) {
			if p, ok := findNull(v[k], path+"."+k); ok {
				return p, true
			}
		}
	case []any:
		for i, e := range v {
			if p, ok := findNull(e, path+"["+strconv.Itoa(i)+"]"); ok {
				return p, true
			}
		}
	}
	return "", false
}

// dump shows a message with its pointers followed, for failure messages.
func dump(m Message) string {
	b, err := json.Marshal(m)
	if err != nil {
		return err.Error()
	}
	return reflect.TypeOf(m).String() + " " + string(b)
}
