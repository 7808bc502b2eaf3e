package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// FuzzDecode feeds arbitrary (metadata.type, body) pairs to Decode. It must
// never panic, must fail only with the two documented error types, and
// whatever it accepts must survive Encode and Decode unchanged.
func FuzzDecode(f *testing.F) {
	for _, pattern := range []string{"testdata/java/*.json", "testdata/*.golden"} {
		files, err := filepath.Glob(pattern)
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			f.Add(typeOfCase(filepath.Base(file)), readFile(f, file))
		}
	}
	f.Add("LockOperationRequest", []byte(`{"lockInstance":{"params":{"a":null,"b":"<&>"},"waitTime":1,"waitTimeMs":null}}`))
	f.Add("LockOperationRequest", []byte(`{"lockInstance":{"key":"k"},"lockInstance":{"owner":"o"}}`))
	f.Add("LockOperationRequest", []byte(`{"LOCKINSTANCE":{"KEY":"k","WaitTime":5}}`))
	f.Add("LockOperationResponse", []byte(`{"lockResult":{},"lockResult":null}`))
	f.Add("ConnectionSetupRequest", []byte("{\"labels\":{\"\xff\":\"\\ud800\"}}"))
	f.Add("NoSuchType", []byte(`{}`))
	f.Add("", []byte(nil))

	f.Fuzz(func(t *testing.T, typ string, body []byte) {
		m, err := Decode(payload(typ, body))
		if err != nil {
			var ute *UnknownTypeError
			var be *BodyError
			switch {
			case errors.As(err, &ute):
				if ute.Type != typ {
					t.Fatalf("UnknownTypeError.Type = %q, want %q", ute.Type, typ)
				}
			case errors.As(err, &be):
				if be.Type != typ {
					t.Fatalf("BodyError.Type = %q, want %q", be.Type, typ)
				}
			default:
				t.Fatalf("Decode error %T %v", err, err)
			}
			if m != nil {
				t.Fatalf("Decode returned %v with an error", m)
			}
			return
		}
		if m.TypeName() != typ {
			t.Fatalf("decoded a %s for type %q", m.TypeName(), typ)
		}
		p, err := Encode(m)
		if err != nil {
			t.Fatalf("Encode(Decode(%q)) failed: %v", body, err)
		}
		enc := p.GetBody().GetValue()
		checkNoNull(t, enc)
		m2, err := Decode(p)
		if err != nil {
			t.Fatalf("Decode(Encode(x)) failed: %v\nbody %s", err, enc)
		}
		if !reflect.DeepEqual(m, m2) {
			t.Fatalf("Decode(Encode(x)) != x:\n   x %s\n got %s", dump(m), dump(m2))
		}
		p2, err := Encode(m2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(p2.GetBody().GetValue(), enc) {
			t.Fatalf("encoding is not stable:\n%s\n%s", enc, p2.GetBody().GetValue())
		}
	})
}

// checkNoNull fails on a JSON null anywhere but inside lockInstance.params,
// which is opaque and passed through as sent.
func checkNoNull(t *testing.T, body []byte) {
	t.Helper()
	v := genericJSON(t, body)
	if obj, ok := v.(map[string]any); ok {
		if li, ok := obj["lockInstance"].(map[string]any); ok {
			delete(li, "params")
		}
	}
	if path, ok := findNull(v, "$"); ok {
		t.Fatalf("encoded null at %s: %s", path, body)
	}
	if !json.Valid(body) || strings.TrimSpace(string(body)) != string(body) {
		t.Fatalf("encoded body is not one compact JSON value: %q", body)
	}
}
