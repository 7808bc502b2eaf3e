package h2grpc

import (
	"errors"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"nacos-lockd/protocol/pb"
)

// The transport carries one message type, pb.Payload, and decoding it by
// hand skips the reflection proto.Unmarshal walks for every call (2.7% of
// the server's CPU under W1 c=64; 1481 -> 641 ns a lock request in
// BenchmarkPayloadDecode). Encoding stays proto.Marshal's: it costs a
// tenth of that, and by hand it measured no faster. The rules are
// protobuf-go's for proto3, so a message decodes exactly as
// proto.Unmarshal would decode it (FuzzPayloadDecode holds the two side by
// side): a known field of the wrong wire type is an unknown field; unknown
// fields are kept, in order; a message field seen twice is merged; the
// last scalar wins; strings must be valid UTF-8; a map entry with a field
// missing takes its zero value and its unknown fields are dropped.

var (
	errPayloadWire = errors.New("proto: cannot parse invalid wire-format data")
	errPayloadUTF8 = errors.New("proto: string field contains invalid UTF-8")
)

// Field numbers in protocol/nacos_grpc_service.proto and any.proto.
const (
	fieldPayloadMetadata = 2
	fieldPayloadBody     = 3
	fieldMetadataType    = 3
	fieldMetadataHeaders = 7
	fieldMetadataIP      = 8
	fieldAnyTypeURL      = 1
	fieldAnyValue        = 2
	fieldEntryKey        = 1
	fieldEntryValue      = 2
)

// unmarshalPayload decodes b into p, which it resets first (as
// proto.Unmarshal). Nothing in p aliases b.
func unmarshalPayload(b []byte, p *pb.Payload) error {
	p.Reset()
	var unknown, mdUnknown, anyUnknown []byte
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return errPayloadWire
		}
		b = b[n:]
		if typ != protowire.BytesType || (num != fieldPayloadMetadata && num != fieldPayloadBody) {
			if unknown, n = keepUnknown(unknown, num, typ, b); n < 0 {
				return errPayloadWire
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return errPayloadWire
		}
		var err error
		if num == fieldPayloadMetadata {
			if p.Metadata == nil {
				p.Metadata = new(pb.Metadata)
			}
			mdUnknown, err = unmarshalMetadata(v, p.Metadata, mdUnknown)
		} else {
			if p.Body == nil {
				p.Body = new(anypb.Any)
			}
			anyUnknown, err = unmarshalAny(v, p.Body, anyUnknown)
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	// Rare (no Nacos client sends unknown fields): only then reflection.
	if len(mdUnknown) > 0 {
		p.Metadata.ProtoReflect().SetUnknown(protoreflect.RawFields(mdUnknown))
	}
	if len(anyUnknown) > 0 {
		p.Body.ProtoReflect().SetUnknown(protoreflect.RawFields(anyUnknown))
	}
	if len(unknown) > 0 {
		p.ProtoReflect().SetUnknown(protoreflect.RawFields(unknown))
	}
	return nil
}

// keepUnknown consumes an unknown field's value from b and appends the
// whole field to unknown; n < 0 if the value is malformed.
func keepUnknown(unknown []byte, num protowire.Number, typ protowire.Type, b []byte) (_ []byte, n int) {
	n = protowire.ConsumeFieldValue(num, typ, b)
	if n < 0 {
		return unknown, n
	}
	return append(protowire.AppendTag(unknown, num, typ), b[:n]...), n
}

// consumeTag parses a field's tag as a message decoder does: an end-group
// tag outside a group and field numbers out of range are errors.
func consumeTag(b []byte) (protowire.Number, protowire.Type, int) {
	num, typ, n := protowire.ConsumeTag(b)
	if n < 0 || num > protowire.MaxValidNumber || typ == protowire.EndGroupType {
		return 0, 0, -1
	}
	return num, typ, n
}

// consumeString parses a length-delimited string field's value.
func consumeString(b []byte) (string, int, error) {
	v, n := protowire.ConsumeBytes(b)
	if n < 0 {
		return "", n, errPayloadWire
	}
	if !utf8.Valid(v) {
		return "", n, errPayloadUTF8
	}
	return string(v), n, nil
}

// unmarshalMetadata merges b into m; unknown fields are appended to
// unknown, which it returns.
func unmarshalMetadata(b []byte, m *pb.Metadata, unknown []byte) ([]byte, error) {
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return unknown, errPayloadWire
		}
		b = b[n:]
		if typ == protowire.BytesType {
			switch num {
			case fieldMetadataType, fieldMetadataIP:
				s, n, err := consumeString(b)
				if err != nil {
					return unknown, err
				}
				if num == fieldMetadataType {
					m.Type = s
				} else {
					m.ClientIp = s
				}
				b = b[n:]
				continue
			case fieldMetadataHeaders:
				v, n := protowire.ConsumeBytes(b)
				if n < 0 {
					return unknown, errPayloadWire
				}
				k, val, err := unmarshalEntry(v)
				if err != nil {
					return unknown, err
				}
				if m.Headers == nil {
					m.Headers = make(map[string]string)
				}
				m.Headers[k] = val
				b = b[n:]
				continue
			}
		}
		if unknown, n = keepUnknown(unknown, num, typ, b); n < 0 {
			return unknown, errPayloadWire
		}
		b = b[n:]
	}
	return unknown, nil
}

// unmarshalEntry parses one map<string, string> entry. Its unknown fields
// are dropped, as protobuf-go drops them.
func unmarshalEntry(b []byte) (key, val string, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || num > protowire.MaxValidNumber {
			return "", "", errPayloadWire
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == fieldEntryKey || num == fieldEntryValue) {
			s, n, err := consumeString(b)
			if err != nil {
				return "", "", err
			}
			if num == fieldEntryKey {
				key = s
			} else {
				val = s
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return "", "", errPayloadWire
		}
		b = b[n:]
	}
	return key, val, nil
}

// unmarshalAny merges b into a, as unmarshalMetadata.
func unmarshalAny(b []byte, a *anypb.Any, unknown []byte) ([]byte, error) {
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return unknown, errPayloadWire
		}
		b = b[n:]
		if typ == protowire.BytesType {
			switch num {
			case fieldAnyTypeURL:
				s, n, err := consumeString(b)
				if err != nil {
					return unknown, err
				}
				a.TypeUrl = s
				b = b[n:]
				continue
			case fieldAnyValue:
				v, n := protowire.ConsumeBytes(b)
				if n < 0 {
					return unknown, errPayloadWire
				}
				a.Value = append([]byte(nil), v...) // a copy: b is a pooled buffer
				b = b[n:]
				continue
			}
		}
		if unknown, n = keepUnknown(unknown, num, typ, b); n < 0 {
			return unknown, errPayloadWire
		}
		b = b[n:]
	}
	return unknown, nil
}
