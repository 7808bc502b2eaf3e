package h2grpc

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"nacos-lockd/protocol/pb"
)

// payloadSeeds are encodings the hand decoder must read as proto.Unmarshal
// does, beside what the fuzzer makes of them.
func payloadSeeds() [][]byte {
	full := &pb.Payload{
		Metadata: &pb.Metadata{Type: "LockOperationRequest", ClientIp: "10.0.0.7", Headers: map[string]string{"accessToken": "t", "app": "a"}},
		Body:     &anypb.Any{TypeUrl: "x", Value: []byte(`{"lockInstance":{"key":"k"}}`)},
	}
	enc := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			panic(err)
		}
		return b
	}
	tag := func(b []byte, num protowire.Number, typ protowire.Type) []byte {
		return protowire.AppendTag(b, num, typ)
	}
	bytesField := func(b []byte, num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(tag(b, num, protowire.BytesType), v)
	}
	md := enc(full.Metadata)
	var seeds [][]byte
	seeds = append(seeds,
		nil,
		enc(full),
		enc(&pb.Payload{Metadata: &pb.Metadata{}, Body: &anypb.Any{}}),
		// Metadata twice: merged. Body twice: merged, the last value wins.
		bytesField(bytesField(nil, 2, md), 2, enc(&pb.Metadata{ClientIp: "b", Headers: map[string]string{"app": "z"}})),
		bytesField(bytesField(nil, 3, enc(&anypb.Any{Value: []byte("1")})), 3, enc(&anypb.Any{TypeUrl: "u"})),
		// Unknown fields at every level, and a known number of the wrong type.
		protowire.AppendVarint(tag(enc(full), 9, protowire.VarintType), 5),
		protowire.AppendVarint(tag(nil, 2, protowire.VarintType), 1),
		bytesField(nil, 2, protowire.AppendFixed32(tag(md, 3, protowire.Fixed32Type), 7)),
		bytesField(nil, 3, protowire.AppendFixed64(tag(nil, 5, protowire.Fixed64Type), 7)),
		// A map entry with a missing key, an unknown field, a wrong type.
		bytesField(nil, 2, bytesField(nil, 7, bytesField(protowire.AppendVarint(tag(nil, 1, protowire.VarintType), 3), 2, []byte("v")))),
		// A group, an unmatched end group, truncations.
		append(tag(tag(nil, 9, protowire.StartGroupType), 9, protowire.EndGroupType), enc(full)...),
		tag(nil, 9, protowire.EndGroupType),
		enc(full)[:len(enc(full))-3],
		// Bad UTF-8 in a string; in bytes it is fine.
		bytesField(nil, 2, bytesField(nil, 3, []byte{0xff})),
		bytesField(nil, 3, bytesField(nil, 2, []byte{0xff})),
		// Field number 0 and one past the largest.
		protowire.AppendVarint([]byte{0x00}, 1),
		protowire.AppendVarint(protowire.AppendVarint(nil, uint64(protowire.MaxValidNumber+1)<<3), 1),
	)
	return seeds
}

// FuzzPayloadDecode holds the hand decoder to protobuf-go's: for any
// bytes, unmarshalPayload fails exactly when proto.Unmarshal does and
// otherwise yields an equal message (unknown fields included).
func FuzzPayloadDecode(f *testing.F) {
	for _, s := range payloadSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var want, got pb.Payload
		werr := proto.Unmarshal(b, &want)
		gerr := unmarshalPayload(b, &got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("%x: proto.Unmarshal %v, unmarshalPayload %v", b, werr, gerr)
		}
		if werr != nil {
			return
		}
		if !proto.Equal(&want, &got) {
			t.Fatalf("%x: decoded %v, proto.Unmarshal %v", b, &got, &want)
		}
	})
}

func TestPayloadDecodeSeeds(t *testing.T) {
	for _, s := range payloadSeeds() {
		var want, got pb.Payload
		werr := proto.Unmarshal(s, &want)
		gerr := unmarshalPayload(s, &got)
		if (werr == nil) != (gerr == nil) || (werr == nil && !proto.Equal(&want, &got)) {
			t.Fatalf("%x: proto.Unmarshal %v (%v), unmarshalPayload %v (%v)", s, &want, werr, &got, gerr)
		}
	}
}

func TestPayloadDecodeRefusals(t *testing.T) {
	var p pb.Payload
	for _, c := range []struct {
		name string
		b    []byte
	}{
		{"end group outside a group", []byte{0x4c}},
		{"field number 0", []byte{0x00, 0x01}},
		{"truncated length", []byte{0x12, 0x05, 0x1a}},
		{"bad UTF-8 in metadata.type", []byte{0x12, 0x03, 0x1a, 0x01, 0xff}},
	} {
		if err := unmarshalPayload(c.b, &p); err == nil {
			t.Errorf("%s: decoded", c.name)
		}
	}
}

// The decoded message must not share memory with the (pooled) buffer.
func TestUnmarshalPayloadCopies(t *testing.T) {
	b, err := proto.Marshal(&pb.Payload{Metadata: &pb.Metadata{Type: "T"}, Body: &anypb.Any{Value: []byte("body")}})
	if err != nil {
		t.Fatal(err)
	}
	var p pb.Payload
	if err := unmarshalPayload(b, &p); err != nil {
		t.Fatal(err)
	}
	for i := range b {
		b[i] = 'x'
	}
	if string(p.GetBody().GetValue()) != "body" || p.GetMetadata().GetType() != "T" {
		t.Fatalf("decoded message changed with its buffer: %v", &p)
	}
	// A reused message starts empty, as with proto.Unmarshal.
	if err := unmarshalPayload(nil, &p); err != nil || p.Metadata != nil || p.Body != nil {
		t.Fatalf("reused message: %v, %v", &p, err)
	}
}

func BenchmarkPayloadDecode(b *testing.B) {
	req := &pb.Payload{
		Metadata: &pb.Metadata{Type: "LockOperationRequest", ClientIp: "127.0.0.1", Headers: map[string]string{"accessToken": strings.Repeat("t", 32)}},
		Body:     &anypb.Any{Value: []byte(`{"lockInstance":{"key":"bench-key-17","expiredTime":30000,"params":{},"lockType":"NACOS_LOCK"},"lockOperationEnum":"ACQUIRE","requestId":"123","headers":{},"module":"lock"}`)},
	}
	enc, _ := proto.Marshal(req)
	b.Run("proto", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var p pb.Payload
			_ = proto.Unmarshal(enc, &p)
		}
	})
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var p pb.Payload
			_ = unmarshalPayload(enc, &p)
		}
	})
}
