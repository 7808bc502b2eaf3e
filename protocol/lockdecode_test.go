package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// The reference for decodeLockOperationRequest: encoding/json for every
// value, with properties matched by exact name. Each object is split into
// its properties in document order, duplicates kept, and each known
// property is unmarshalled into its field in turn, so that duplicates
// behave as they do under encoding/json (a later null leaves a string
// alone, a later headers object merges into the map). The post-processing
// is LockInstance.UnmarshalJSON's and Decode's, restated.

// refMember is one property of a JSON object.
type refMember struct {
	name string
	raw  json.RawMessage
}

// refMembers splits a JSON object into its properties, in order.
func refMembers(data []byte) ([]refMember, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if tok != json.Delim('{') {
		return nil, fmt.Errorf("want an object, got %v", tok)
	}
	var ms []refMember
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		name, ok := tok.(string)
		if !ok {
			return nil, fmt.Errorf("property name %v", tok)
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		ms = append(ms, refMember{name, raw})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	return ms, nil
}

var (
	refRequestNames  = []string{"headers", "requestId", "lockInstance", "lockOperationEnum"}
	refInstanceNames = []string{"key", "expiredTime", "lockType", "params", "owner", "waitTimeMs", "waiterRetry", "waitTime"}
)

func refDecodeLockOperationRequest(body []byte) (*LockOperationRequest, error) {
	if t := bytes.TrimLeft(body, " \t\r\n"); len(t) > 0 && t[0] != '{' {
		return nil, errNotObject
	}
	if !json.Valid(body) { // syntax, depth and trailing data, as json.Unmarshal checks them
		return nil, errors.New("not valid JSON")
	}
	members, err := refMembers(body)
	if err != nil {
		return nil, err
	}
	r := new(LockOperationRequest)
	for _, m := range members {
		switch m.name {
		case "headers":
			err = json.Unmarshal(m.raw, &r.Headers)
		case "requestId":
			err = json.Unmarshal(m.raw, &r.RequestID)
		case "lockOperationEnum":
			err = json.Unmarshal(m.raw, &r.LockOperationEnum)
		case "lockInstance":
			if string(m.raw) == "null" {
				r.LockInstance = nil
				continue
			}
			r.LockInstance, err = refDecodeLockInstance(m.raw)
		}
		if err != nil {
			return nil, err
		}
	}
	if len(r.Headers) == 0 {
		r.Headers = nil
	}
	return r, nil
}

func refDecodeLockInstance(data []byte) (*LockInstance, error) {
	members, err := refMembers(data)
	if err != nil {
		return nil, err
	}
	var w lockInstanceJSON
	for _, m := range members {
		var dst any
		switch m.name {
		case "key":
			dst = &w.Key
		case "expiredTime":
			dst = &w.ExpiredTime
		case "lockType":
			dst = &w.LockType
		case "params":
			dst = &w.Params
		case "owner":
			dst = &w.Owner
		case "waitTimeMs":
			dst = &w.WaitTimeMs
		case "waiterRetry":
			dst = &w.WaiterRetry
		case "waitTime":
			dst = &w.WaitTime
		default:
			continue
		}
		if err := json.Unmarshal(m.raw, dst); err != nil {
			return nil, err
		}
	}
	params, err := readParams(w.Params)
	if err != nil {
		return nil, err
	}
	li := &LockInstance{Key: w.Key, ExpiredTime: w.ExpiredTime, LockType: w.LockType, Params: params, Owner: w.Owner,
		WaitTimeMs: w.WaitTimeMs, WaiterRetry: w.WaiterRetry != nil && *w.WaiterRetry}
	if li.WaitTimeMs == nil {
		li.WaitTimeMs = w.WaitTime
	}
	return li, nil
}

// refFolded reports whether encoding/json would match a property of body
// that the exact-case decoders ignore: a name that equals a known one only
// when case is folded (encoding/json folds as bytes.EqualFold does). Only
// for such bodies may the reference differ from the reflective decoder.
func refFolded(body []byte) bool {
	folds := func(name string, known []string) bool {
		for _, k := range known {
			if name != k && strings.EqualFold(name, k) {
				return true
			}
		}
		return false
	}
	members, err := refMembers(body)
	if err != nil {
		return false
	}
	for _, m := range members {
		if folds(m.name, refRequestNames) {
			return true
		}
		if !strings.EqualFold(m.name, "lockInstance") {
			continue
		}
		inner, err := refMembers(m.raw)
		if err != nil {
			continue
		}
		for _, im := range inner {
			if folds(im.name, refInstanceNames) {
				return true
			}
		}
	}
	return false
}

// reflectDecodeLock is the old path: Decode as it was before the
// hand-written decoder.
func reflectDecodeLock(body []byte) (*LockOperationRequest, error) {
	m, err := decodeReflect("LockOperationRequest", body)
	if err != nil {
		return nil, err
	}
	return m.(*LockOperationRequest), nil
}

// nestedParams is a body whose nesting depth is 3 + n: the request, the
// lock instance, params, then n arrays.
func nestedParams(n int) []byte {
	return []byte(`{"lockInstance":{"params":{"a":` + strings.Repeat("[", n) + strings.Repeat("]", n) + `}}}`)
}

// nestedUnknown is a body whose nesting depth is 1 + n, in a property
// nobody reads.
func nestedUnknown(n int) []byte {
	return []byte(`{"x":` + strings.Repeat(`[{"y":`, n/2) + strings.Repeat("[", n%2) + strings.Repeat("]", n%2) +
		strings.Repeat(`}]`, n/2) + `}`)
}

// hostileLockBodies are the seeds beyond real client bodies: case variants,
// duplicates, nulls, wrong types, numbers, strings, nesting, white space,
// trailing data, bad syntax.
var hostileLockBodies = []string{
	// Case variants and escaped names.
	`{"lockInstance":{"Key":"a","KEY":"b"}}`,
	`{"lockInstance":{"KEY":"b","key":"c","kEy":5}}`,
	`{"LockOperationEnum":"ACQUIRE","lockOperationEnum":"RELEASE","LOCKOPERATIONENUM":1}`,
	`{"lockinstance":{"key":"a"},"LockInstance":5}`,
	`{"Headers":{"a":"b"},"REQUESTID":"r","RequestId":7}`,
	`{"lockInstance":{"Owner":"o","ExpiredTime":"x","WaitTimeMs":1,"waittime":2,"WaiterRetry":true,"Params":[1],"LockType":null}}`,
	`{"lockInstance":{"\u212Aey":"kelvin sign"}}`,
	"{\"lockInstance\":{\"\xe2\x84\xaaey\":\"kelvin sign, raw\"}}",
	`{"lockInstance":{"k\u0065y":"escaped name"},"lock\u004fperationEnum":"RENEW"}`,
	`{"lockInstance":{"key\u0000":"nul in name"}}`,
	// Duplicates and nulls.
	`{"requestId":"a","requestId":null,"lockOperationEnum":"ACQUIRE","lockOperationEnum":null}`,
	`{"headers":{"a":"1"},"headers":{"b":"2"}}`,
	`{"headers":{"a":"1","c":"4"},"headers":{"b":"2","a":"3"},"headers":{}}`,
	`{"headers":{"a":"1"},"headers":null}`,
	`{"headers":null,"headers":{}}`,
	`{"headers":{"a":null,"":"empty","\ud800":"x"}}`,
	`{"lockInstance":{"owner":"a","owner":null}}`,
	`{"lockInstance":{"key":"a","key":null,"lockType":"REENTRANT","lockType":null}}`,
	`{"lockInstance":{"key":"a","key":"b","expiredTime":1,"expiredTime":2}}`,
	`{"lockInstance":{"params":[1],"params":{"a":1}}}`,
	`{"lockInstance":{"params":{"a":1},"params":[1]}}`,
	`{"lockInstance":{"params":{"a":1},"params":null}}`,
	`{"lockInstance":{"params":"{}"}}`,
	`{"lockInstance":{"params": {"a" : [ 1 , {"b":"\u00e9"} ] } }}`,
	`{"lockInstance":{"key":"k","owner":"o"},"lockInstance":{"waitTime":5}}`,
	`{"lockInstance":{"key":"k"},"lockInstance":null}`,
	`{"lockInstance":null,"lockInstance":{}}`,
	`{"lockInstance":{"key":"k"},"lockInstance":{"params":5}}`,
	`{"lockInstance":{"waitTimeMs":1,"waitTimeMs":null,"waitTime":2}}`,
	`{"lockInstance":{"waitTime":2,"waitTimeMs":1,"waitTime":3}}`,
	`{"lockInstance":{"waiterRetry":true,"waiterRetry":null}}`,
	`{"lockInstance":{"waiterRetry":true,"waiterRetry":false,"waiterRetry":true}}`,
	// Wrong types.
	`{"lockInstance":{"key":5}}`,
	`{"lockInstance":{"key":["a"]}}`,
	`{"lockInstance":{"owner":{}}}`,
	`{"lockInstance":{"lockType":true}}`,
	`{"lockInstance":"x"}`,
	`{"lockInstance":true}`,
	`{"lockInstance":[]}`,
	`{"lockInstance":7}`,
	`{"headers":{"a":1}}`,
	`{"headers":{"a":{}}}`,
	`{"headers":"x"}`,
	`{"headers":[]}`,
	`{"requestId":{}}`,
	`{"requestId":false}`,
	`{"lockOperationEnum":["ACQUIRE"]}`,
	`{"lockInstance":{"waiterRetry":0}}`,
	`{"lockInstance":{"waiterRetry":"true"}}`,
	`{"lockInstance":{"expiredTime":true}}`,
	`{"lockInstance":{"expiredTime":"5"}}`,
	`{"lockInstance":{"expiredTime":{}}}`,
	// Numbers.
	`{"lockInstance":{"expiredTime":1.0}}`,
	`{"lockInstance":{"expiredTime":1e3}}`,
	`{"lockInstance":{"expiredTime":1E+2}}`,
	`{"lockInstance":{"expiredTime":-0}}`,
	`{"lockInstance":{"expiredTime":0,"waitTimeMs":-1}}`,
	`{"lockInstance":{"expiredTime":9223372036854775807,"waitTimeMs":-9223372036854775808}}`,
	`{"lockInstance":{"expiredTime":9223372036854775808}}`,
	`{"lockInstance":{"waitTimeMs":-9223372036854775809}}`,
	`{"lockInstance":{"waitTime":123456789012345678901234567890}}`,
	`{"lockInstance":{"expiredTime":18446744073709551616}}`,
	`{"lockInstance":{"expiredTime":00}}`,
	`{"lockInstance":{"expiredTime":01}}`,
	`{"lockInstance":{"expiredTime":-01}}`,
	`{"lockInstance":{"expiredTime":-}}`,
	`{"lockInstance":{"expiredTime":1.}}`,
	`{"lockInstance":{"expiredTime":1e}}`,
	`{"lockInstance":{"expiredTime":+1}}`,
	`{"lockInstance":{"expiredTime":.5}}`,
	`{"lockInstance":{"expiredTime":0x10}}`,
	`{"x":-0.0e-0,"y":[1.5e308,-1e-400,0]}`,
	// Strings.
	`{"lockInstance":{"key":"\ud83d\udd12 \u00e9 \u20ac \\ \/ \" \b\f\n\r\t"}}`,
	`{"lockInstance":{"key":"\ud800"}}`,
	`{"lockInstance":{"key":"\udc00\ud800"}}`,
	`{"lockInstance":{"key":"\ud800\u0041"}}`,
	`{"lockInstance":{"key":"\ud800\ud800\udc00"}}`,
	`{"lockInstance":{"key":"\uD83D\uDD12\uDbFf\uDfFf"}}`,
	`{"lockInstance":{"key":"\ud800\u00"}}`,
	`{"lockInstance":{"key":"\u00"}}`,
	`{"lockInstance":{"key":"\u00g0"}}`,
	`{"lockInstance":{"key":"\'"}}`,
	`{"lockInstance":{"key":"\x"}}`,
	`{"lockInstance":{"key":"\`,
	`{"lockInstance":{"key":"abc`,
	"{\"lockInstance\":{\"key\":\"\xff\xfe ok\"}}",
	"{\"lockInstance\":{\"key\":\"\xed\xa0\x80\"}}",
	"{\"lockInstance\":{\"key\":\"\xe2\x82\"}}",
	"{\"lockInstance\":{\"key\":\"a\xe2\x82\\n\xf0\x9f\x94\x92\"}}",
	"{\"lockInstance\":{\"key\":\"\x01\"}}",
	"{\"lockInstance\":{\"key\":\"\x7f \u2028 \xef\xbf\xbd\"}}",
	"{\"lockInstance\":{\"owner\":\"tab\there\"}}",
	// Nesting.
	`{"lockInstance":{"params":{"a":[[[[{"b":[],"c":{}}]]]],"d":{"e":{"f":null}}}}}`,
	`{"module":{"a":[{"b":[{"c":[true,false,null,"s",-1.5e2]}]}]}}`,
	// White space, trailing data, not an object.
	" \t\r\n{ \"lockInstance\" : { \"key\" : \"k\" , \"expiredTime\" : 5 } , \"headers\" : { } } \n",
	"\f{}",
	"{}\x00",
	"{\"lockInstance\":\v{}}",
	`{} x`,
	`{}}`,
	`{},`,
	`{}{}`,
	`null`,
	`[]`,
	`"x"`,
	`5`,
	``,
	` `,
	"\xef\xbb\xbf{}",
	// Syntax.
	`{`,
	`{"a":1,}`,
	`{,}`,
	`{"a"}`,
	`{"a":}`,
	`{"a" 1}`,
	`{"a":1 "b":2}`,
	`{a:1}`,
	`{'a':1}`,
	`{"lockInstance":{"key":"a",}}`,
	`{"lockInstance":{"key":"a"}`,
	`{"module":[1,2,]}`,
	`{"module":[1 2]}`,
	`{"module":[}`,
	`{"module":{]}`,
	`{"x":tru}`,
	`{"x":nul}`,
	`{"x":nulll}`,
	`{"x":True}`,
	`{"lockInstance":nul}`,
	`{"lockInstance":{"waiterRetry":fals}}`,
}

func FuzzLockOperationRequestDecoder(f *testing.F) {
	for _, pattern := range []string{"testdata/java/LockOperationRequest.*.json", "testdata/LockOperationRequest.*.golden"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		if len(files) == 0 {
			f.Fatalf("no seeds match %s", pattern)
		}
		for _, file := range files {
			f.Add(readFile(f, file))
		}
	}
	for _, b := range hostileLockBodies {
		f.Add([]byte(b))
	}
	for _, n := range []int{maxJSONDepth - 3, maxJSONDepth - 2} {
		f.Add(nestedParams(n))
	}
	for _, n := range []int{maxJSONDepth - 1, maxJSONDepth} {
		f.Add(nestedUnknown(n))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkLockDecoder(t, body)
	})
}

// checkLockDecoder holds the hand-written decoder to the reference, and the
// reference to the reflective decoder wherever case folding plays no part.
func checkLockDecoder(t *testing.T, body []byte) {
	t.Helper()
	got, err := decodeLockOperationRequest(body)
	want, wantErr := refDecodeLockOperationRequest(body)
	switch {
	case (err == nil) != (wantErr == nil):
		t.Fatalf("body %q:\n decoder error %v\n reference error %v", body, err, wantErr)
	case err != nil:
		if got != nil || err.Error() == "" {
			t.Fatalf("body %q: decoder returned %v with error %q", body, got, err)
		}
	case !reflect.DeepEqual(got, want):
		t.Fatalf("body %q:\n  decoder %s\nreference %s", body, dump(got), dump(want))
	}
	if !refFolded(body) {
		old, oldErr := reflectDecodeLock(body)
		switch {
		case (oldErr == nil) != (wantErr == nil):
			t.Fatalf("body %q: reference error %v, encoding/json error %v", body, wantErr, oldErr)
		case oldErr == nil && !reflect.DeepEqual(old, want):
			t.Fatalf("body %q:\n     reference %s\nencoding/json %s", body, dump(want), dump(old))
		}
	}
	m, derr := Decode(payload("LockOperationRequest", body))
	if err != nil {
		var be *BodyError
		if m != nil || !errors.As(derr, &be) || be.Type != "LockOperationRequest" || !errors.Is(derr, be.Err) || be.Err.Error() != err.Error() {
			t.Fatalf("Decode(%q) = %v, %v; want a LockOperationRequest *BodyError for %v", body, m, derr, err)
		}
	} else if derr != nil || !reflect.DeepEqual(m, Message(got)) {
		t.Fatalf("Decode(%q) = %v, %v; want %s", body, m, derr, dump(got))
	}
}

func TestLockDecoderMatchesReference(t *testing.T) {
	for _, b := range hostileLockBodies {
		checkLockDecoder(t, []byte(b))
	}
}

// The depth limit is encoding/json's, to the level.
func TestLockDecoderDepth(t *testing.T) {
	for _, tt := range []struct {
		body []byte
		ok   bool
	}{
		{nestedParams(maxJSONDepth - 3), true},
		{nestedParams(maxJSONDepth - 2), false},
		{nestedUnknown(maxJSONDepth - 1), true},
		{nestedUnknown(maxJSONDepth), false},
	} {
		_, err := decodeLockOperationRequest(tt.body)
		if (err == nil) != tt.ok {
			t.Errorf("body of %d bytes: error %v, want ok=%v", len(tt.body), err, tt.ok)
		}
		checkLockDecoder(t, tt.body)
	}
}

// Property names match exactly, as Jackson matches them: a name that
// differs in case is an unknown property, ignored whatever its value.
// encoding/json, and so the old decoder, folded case.
func TestLockDecoderCaseSensitive(t *testing.T) {
	tests := []struct {
		body string
		want *LockOperationRequest
	}{
		{`{"lockInstance":{"KEY":"a"}}`, &LockOperationRequest{LockInstance: &LockInstance{}}},
		{`{"lockInstance":{"Key":"a","key":"b","KEY":"c"}}`, &LockOperationRequest{LockInstance: &LockInstance{Key: ptr("b")}}},
		{`{"lockInstance":{"Key":5,"ExpiredTime":"x","Params":[1],"WaiterRetry":"yes"}}`, &LockOperationRequest{LockInstance: &LockInstance{}}},
		{`{"lockInstance":{"Owner":"o","waittime":5,"WaitTimeMs":6,"LockType":"REENTRANT"}}`, &LockOperationRequest{LockInstance: &LockInstance{}}},
		{`{"LockOperationEnum":"ACQUIRE"}`, &LockOperationRequest{}},
		{`{"lockOperationEnum":"RELEASE","LockOperationEnum":"ACQUIRE"}`, &LockOperationRequest{LockOperationEnum: OpRelease}},
		{`{"LOCKINSTANCE":{"key":"k"},"lockinstance":{"key":"k"}}`, &LockOperationRequest{}},
		{`{"Headers":{"a":"b"},"RequestId":"7","requestID":"8"}`, &LockOperationRequest{}},
		// U+212A KELVIN SIGN folds to k in encoding/json.
		{`{"lockInstance":{"\u212Aey":"a"}}`, &LockOperationRequest{LockInstance: &LockInstance{}}},
		// An escaped name is its unescaped self, for Jackson too.
		{`{"lockInstance":{"k\u0065y":"a"},"lockOperation\u0045num":"RENEW"}`,
			&LockOperationRequest{LockInstance: &LockInstance{Key: ptr("a")}, LockOperationEnum: OpRenew}},
	}
	for _, tt := range tests {
		got, err := decodeLockOperationRequest([]byte(tt.body))
		if err != nil {
			t.Errorf("%s: %v", tt.body, err)
			continue
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s:\n got %s\nwant %s", tt.body, dump(got), dump(tt.want))
		}
		if old, err := reflectDecodeLock([]byte(tt.body)); err == nil && reflect.DeepEqual(old, tt.want) && !strings.Contains(tt.body, `k\u0065y`) {
			t.Errorf("%s: encoding/json decodes it the same way, so the case proves nothing", tt.body)
		}
	}
}

// Errors name the property and keep the cause.
func TestLockDecoderErrors(t *testing.T) {
	for body, want := range map[string]string{
		`{"lockInstance":{"key":5}}`:                   "lockInstance: key: want a string, got a number",
		`{"lockInstance":{"expiredTime":1.5}}`:         "lockInstance: expiredTime: number 1.5 is not an int64",
		`{"lockInstance":{"waitTimeMs":1e400}}`:        "lockInstance: waitTimeMs: number 1e400 is not an int64",
		`{"lockInstance":{"params":[1]}}`:              "lockInstance: params: want a JSON object",
		`{"lockInstance":{"k\u0065y":"\u0041","x":[}}`: "lockInstance: unknown property: invalid character",
		`{"headers":{"a":1}}`:                          `headers: "a": want a string, got a number`,
		`{"lockOperationEnum":1}`:                      "lockOperationEnum: want a string, got a number",
		`{"lockInstance":5}`:                           "lockInstance: want an object, got a number",
		`{} x`:                                         `invalid character "x" after top-level value (offset 3)`,
		`{"lockInstance":{"key":"a"}`:                  "unexpected end of JSON input",
		`[]`:                                           errNotObject.Error(),
		``:                                             "unexpected end of JSON input",
		`{"x":` + strings.Repeat("[", maxJSONDepth) + `}`: "unknown property: exceeded max depth",
	} {
		_, err := decodeLockOperationRequest([]byte(body))
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%.60s: error %v, want %q...", body, err, want)
		}
	}
}
