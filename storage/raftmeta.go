package storage

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// RaftMetaName is the file JRaft writes beside the files of a snapshot,
// naming them and carrying their metadata.
const RaftMetaName = "__raft_snapshot_meta"

// raftMetaMessage is the protobuf message name JRaft writes before the
// message itself (ProtoBufFile.save).
const raftMetaMessage = "jraft.LocalSnapshotPbMeta"

// maxRaftMeta bounds the __raft_snapshot_meta file we read: it names a
// handful of files, so anything this large is not one.
const maxRaftMeta = 1 << 20

// ErrBadRaftMeta wraps every reason DecodeRaftMeta refuses its input.
var ErrBadRaftMeta = errors.New("storage: bad " + RaftMetaName)

// RaftMeta is JRaft's LocalSnapshotPbMeta (local_storage.proto): the
// snapshot's SnapshotMeta (raft.proto) and the files in the snapshot
// directory.
//
//	message LocalSnapshotPbMeta { optional SnapshotMeta meta = 1; repeated File files = 2; }
//	message File { required string name = 1; optional LocalFileMeta meta = 2; }
//	message SnapshotMeta { required int64 last_included_index = 1; required int64 last_included_term = 2;
//	    repeated string peers = 3; repeated string old_peers = 4;
//	    repeated string learners = 5; repeated string old_learners = 6; }
//	message LocalFileMeta { optional bytes user_meta = 1; optional FileSource source = 2;
//	    optional string checksum = 3; optional int64 file_size = 4 (newer JRaft only); }
//
// Field numbers are taken from sofa-jraft's proto files and checked against
// the bytes jraft-core 1.3.15 writes (compat/testdata/nacos).
type RaftMeta struct {
	HasSnapshotMeta   bool // the optional meta field is present
	LastIncludedIndex int64
	LastIncludedTerm  int64
	Peers             []string
	OldPeers          []string
	Learners          []string
	OldLearners       []string
	Files             []RaftFile
}

// RaftFile is one entry of RaftMeta.Files.
type RaftFile struct {
	Name    string
	HasMeta bool // the optional LocalFileMeta is present
	// UserMeta is opaque to JRaft; Nacos puts its LocalFileMeta there as
	// JSON (see NacosChecksum).
	UserMeta []byte
	Source   int32  // FileSource: 0 local, 1 reference
	Checksum string // JRaft's own checksum; Nacos leaves it empty
}

// File returns the entry named name.
func (m RaftMeta) File(name string) (RaftFile, bool) {
	for _, f := range m.Files {
		if f.Name == name {
			return f, true
		}
	}
	return RaftFile{}, false
}

// EncodeRaftMeta renders m as JRaft writes __raft_snapshot_meta: the
// message name's length (4 bytes, big-endian), the name, the message's
// length (4 bytes, big-endian), the protobuf message.
func EncodeRaftMeta(m RaftMeta) []byte {
	var msg []byte
	if m.HasSnapshotMeta {
		var sm []byte
		sm = protowire.AppendTag(sm, 1, protowire.VarintType)
		sm = protowire.AppendVarint(sm, uint64(m.LastIncludedIndex))
		sm = protowire.AppendTag(sm, 2, protowire.VarintType)
		sm = protowire.AppendVarint(sm, uint64(m.LastIncludedTerm))
		for i, list := range [][]string{m.Peers, m.OldPeers, m.Learners, m.OldLearners} {
			for _, s := range list {
				sm = protowire.AppendTag(sm, protowire.Number(3+i), protowire.BytesType)
				sm = protowire.AppendString(sm, s)
			}
		}
		msg = protowire.AppendTag(msg, 1, protowire.BytesType)
		msg = protowire.AppendBytes(msg, sm)
	}
	for _, f := range m.Files {
		var fb []byte
		fb = protowire.AppendTag(fb, 1, protowire.BytesType)
		fb = protowire.AppendString(fb, f.Name)
		if f.HasMeta {
			var lm []byte
			if f.UserMeta != nil {
				lm = protowire.AppendTag(lm, 1, protowire.BytesType)
				lm = protowire.AppendBytes(lm, f.UserMeta)
			}
			if f.Source != 0 {
				lm = protowire.AppendTag(lm, 2, protowire.VarintType)
				lm = protowire.AppendVarint(lm, uint64(int64(f.Source)))
			}
			if f.Checksum != "" {
				lm = protowire.AppendTag(lm, 3, protowire.BytesType)
				lm = protowire.AppendString(lm, f.Checksum)
			}
			fb = protowire.AppendTag(fb, 2, protowire.BytesType)
			fb = protowire.AppendBytes(fb, lm)
		}
		msg = protowire.AppendTag(msg, 2, protowire.BytesType)
		msg = protowire.AppendBytes(msg, fb)
	}
	out := binary.BigEndian.AppendUint32(nil, uint32(len(raftMetaMessage)))
	out = append(out, raftMetaMessage...)
	out = binary.BigEndian.AppendUint32(out, uint32(len(msg)))
	return append(out, msg...)
}

// DecodeRaftMeta parses a __raft_snapshot_meta file. Unknown fields are
// skipped, as protobuf readers do; a missing required field, a different
// message name or trailing bytes are refused.
func DecodeRaftMeta(b []byte) (RaftMeta, error) {
	var m RaftMeta
	if len(b) > maxRaftMeta {
		return m, fmt.Errorf("%w: %d bytes, more than %d", ErrBadRaftMeta, len(b), maxRaftMeta)
	}
	if len(b) < 4 {
		return m, fmt.Errorf("%w: truncated header", ErrBadRaftMeta)
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	if uint64(n) > uint64(len(b)) {
		return m, fmt.Errorf("%w: truncated message name", ErrBadRaftMeta)
	}
	if name := string(b[:n]); name != raftMetaMessage {
		return m, fmt.Errorf("%w: message %q, want %q", ErrBadRaftMeta, name, raftMetaMessage)
	}
	b = b[n:]
	if len(b) < 4 {
		return m, fmt.Errorf("%w: truncated message length", ErrBadRaftMeta)
	}
	n = binary.BigEndian.Uint32(b)
	b = b[4:]
	if uint64(n) != uint64(len(b)) {
		return m, fmt.Errorf("%w: message length %d, %d bytes follow", ErrBadRaftMeta, n, len(b))
	}
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			m.HasSnapshotMeta = true
			return decodeSnapshotMeta(v, &m)
		case num == 2 && typ == protowire.BytesType:
			f, err := decodeRaftFile(v)
			if err != nil {
				return err
			}
			m.Files = append(m.Files, f)
		case num == 1 || num == 2:
			return fmt.Errorf("field %d has wire type %d", num, typ)
		}
		return nil
	})
	if err != nil {
		return RaftMeta{}, fmt.Errorf("%w: %w", ErrBadRaftMeta, err)
	}
	return m, nil
}

func decodeSnapshotMeta(b []byte, m *RaftMeta) error {
	var haveIndex, haveTerm bool
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch {
		case (num == 1 || num == 2) && typ == protowire.VarintType:
			if num == 1 {
				m.LastIncludedIndex, haveIndex = int64(x), true
			} else {
				m.LastIncludedTerm, haveTerm = int64(x), true
			}
		case num >= 3 && num <= 6 && typ == protowire.BytesType:
			lists := []*[]string{&m.Peers, &m.OldPeers, &m.Learners, &m.OldLearners}
			*lists[num-3] = append(*lists[num-3], string(v))
		case num >= 1 && num <= 6:
			return fmt.Errorf("snapshot meta field %d has wire type %d", num, typ)
		}
		return nil
	})
	if err == nil && (!haveIndex || !haveTerm) {
		err = errors.New("snapshot meta lacks last_included_index or last_included_term")
	}
	return err
}

func decodeRaftFile(b []byte) (RaftFile, error) {
	var f RaftFile
	var haveName bool
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			f.Name, haveName = string(v), true
		case num == 2 && typ == protowire.BytesType:
			f.HasMeta = true
			return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
				switch {
				case num == 1 && typ == protowire.BytesType:
					f.UserMeta = append([]byte{}, v...)
				case num == 2 && typ == protowire.VarintType:
					f.Source = int32(x)
				case num == 3 && typ == protowire.BytesType:
					f.Checksum = string(v)
				case num >= 1 && num <= 3:
					return fmt.Errorf("file meta field %d has wire type %d", num, typ)
				}
				return nil
			})
		case num == 1 || num == 2:
			return fmt.Errorf("file field %d has wire type %d", num, typ)
		}
		return nil
	})
	if err == nil && !haveName {
		err = errors.New("file entry without a name")
	}
	return f, err
}

// eachField walks a protobuf message, handing each field's number, wire
// type and value (bytes for length-delimited fields, x for varints) to fn.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		var v []byte
		var x uint64
		switch typ {
		case protowire.VarintType:
			x, n = protowire.ConsumeVarint(b)
		case protowire.BytesType:
			v, n = protowire.ConsumeBytes(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if err := fn(num, typ, v, x); err != nil {
			return err
		}
	}
	return nil
}

// nacosUserMeta is the JSON Nacos stores in a file's user_meta: its
// com.alibaba.nacos.consistency.snapshot.LocalFileMeta as Jackson writes
// it, a "fileMeta" object (java.util.Properties) of string properties.
type nacosUserMeta struct {
	FileMeta map[string]json.RawMessage `json:"fileMeta"`
}

// NacosChecksumKey is the property under which Nacos records an archive's
// checksum (NacosLockSnapshotOperation.CHECK_SUM_KEY).
const NacosChecksumKey = "checksum"

// NacosUserMeta renders the user_meta Nacos writes for an archive with the
// given checksum: {"fileMeta":{"checksum":"<hex>"}}.
func NacosUserMeta(checksum uint64) []byte {
	b, _ := json.Marshal(map[string]map[string]string{"fileMeta": {NacosChecksumKey: FormatChecksum(checksum)}})
	return b
}

// NacosChecksum extracts the recorded checksum from a file's user_meta.
// Like Nacos, an empty user_meta or one without the key records nothing
// (ok false); a value that is not a string is an error.
func NacosChecksum(userMeta []byte) (checksum string, ok bool, err error) {
	if len(userMeta) == 0 {
		return "", false, nil
	}
	var um nacosUserMeta
	if err := json.Unmarshal(userMeta, &um); err != nil {
		return "", false, fmt.Errorf("%w: user_meta is not Nacos's JSON: %w", ErrBadRaftMeta, err)
	}
	raw, ok := um.FileMeta[NacosChecksumKey]
	if !ok {
		return "", false, nil
	}
	if err := json.Unmarshal(raw, &checksum); err != nil {
		return "", false, fmt.Errorf("%w: user_meta checksum is not a string: %s", ErrBadRaftMeta, raw)
	}
	return checksum, true, nil
}
