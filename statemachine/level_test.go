package statemachine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"testing"

	"nacos-lockd/storage/storagetest"
)

func TestLevelEntryCodec(t *testing.T) {
	for _, l := range []int{LevelBaseline, LevelGate, 300} {
		e := EncodeLevel(l)
		if !IsLevelEntry(e) || IsBatch(e) {
			t.Fatalf("level %d: entry %x not told apart from commands and frames", l, e)
		}
		got, err := DecodeLevel(e)
		if err != nil || got != l {
			t.Fatalf("level %d: decoded %d, %v", l, got, err)
		}
		if _, err := DecodeCommand(e); err == nil {
			t.Fatalf("a level entry decodes as a command")
		}
	}
	for name, e := range map[string][]byte{
		"empty":    {levelEntryVersion},
		"trailing": append(EncodeLevel(2), 0),
		"zero":     EncodeLevel(0),
		"huge":     binary.AppendUvarint([]byte{levelEntryVersion}, 1<<40),
		"command":  acq(N, "k", "o", "c", 1, 10, 0).Encode(),
	} {
		if _, err := DecodeLevel(e); err == nil {
			t.Errorf("%s: %x decoded", name, e)
		}
	}
}

func TestApplyLevelOnlyRises(t *testing.T) {
	tb := NewTable()
	if tb.Level() != LevelBaseline {
		t.Fatalf("new table at level %d", tb.Level())
	}
	steps := []struct {
		level   int
		outcome LevelOutcome
		after   int
	}{
		{LevelBaseline, LevelUnchanged, LevelBaseline},
		{LevelGate, LevelRaised, LevelGate},
		{LevelGate, LevelUnchanged, LevelGate}, // a second leader's poll: idempotent
		{LevelBaseline, LevelRefused, LevelGate},
		{MaxLevel + 1, LevelUnreadable, LevelGate},
	}
	for i, s := range steps {
		index := uint64(i + 1)
		o, l := tb.ApplyLevel(index, EncodeLevel(s.level))
		if o != s.outcome || l != s.level || tb.Level() != s.after || tb.Applied() != index {
			t.Fatalf("step %d (level %d): outcome %v level %d, table at %d applied %d; want %v, %d", i, s.level, o, l, tb.Level(), tb.Applied(), s.outcome, s.after)
		}
	}
	if o, _ := tb.ApplyLevel(9, []byte{levelEntryVersion, 0xff}); o != LevelMalformed || tb.Level() != LevelGate || tb.Applied() != 9 {
		t.Fatalf("malformed entry: %v, level %d", o, tb.Level())
	}
	// Through ApplyEncoded, as replicatest and the determinism tests apply.
	if r := NewTable().ApplyEncoded(1, EncodeLevel(LevelGate)); r.Code != CodeOK {
		t.Fatalf("ApplyEncoded: %v", r.Code)
	}
	if r := NewTable().ApplyEncoded(1, EncodeLevel(MaxLevel+1)); r.Code != CodeMalformed {
		t.Fatalf("ApplyEncoded of an unreadable level: %v", r.Code)
	}
}

// A log without level entries, as every build before the gate wrote it,
// replays to the baseline and writes the snapshot format those builds
// read, byte for byte what it wrote before.
func TestOldLogStaysAtBaseline(t *testing.T) {
	tb := replay(goldenV2Table(t), goldenV3Commands())
	if tb.Level() != LevelBaseline {
		t.Fatalf("level %d", tb.Level())
	}
	b := tb.StateBytes()
	if v, _ := binary.Uvarint(b[len(snapshotMagic):]); v != BaselineSnapshotVersion {
		t.Fatalf("a baseline table is written in format %d, want %d", v, BaselineSnapshotVersion)
	}
	if !bytes.Equal(b, goldenContent(t, "testdata/snapshot-v3.stream")) {
		t.Fatal("a baseline table's snapshot differs from the format-3 golden")
	}
}

func TestSnapshotCarriesLevel(t *testing.T) {
	tb := replay(NewTable(), goldenCommands())
	tb.ApplyLevel(tb.applied+1, EncodeLevel(LevelGate))
	b := tb.StateBytes()
	got, v, err := ReadSnapshot(bytes.NewReader(b))
	if err != nil || v != 4 || got.Level() != LevelGate || !bytes.Equal(got.StateBytes(), b) {
		t.Fatalf("round trip: version %d level %d, %v", v, got.Level(), err)
	}
	// Format 4 names a level above the baseline; a reader refuses one
	// below it, and one above what it reads.
	header := func(level uint64) []byte {
		h := binary.AppendUvarint([]byte(snapshotMagic), 4)
		for _, x := range []uint64{0, 0, 0, 0, level} { // applied, clock (varint 0), fence, base, level
			h = binary.AppendUvarint(h, x)
		}
		return append(h, 'E', 0)
	}
	if _, _, err := ReadSnapshot(bytes.NewReader(header(LevelGate))); err != nil {
		t.Fatalf("empty format-4 table: %v", err)
	}
	if _, _, err := ReadSnapshot(bytes.NewReader(header(LevelBaseline))); err == nil {
		t.Fatal("format 4 at the baseline level accepted")
	}
	if _, _, err := ReadSnapshot(bytes.NewReader(header(MaxLevel + 1))); !errors.Is(err, ErrLevelUnreadable) {
		t.Fatalf("format 4 above this build's level: %v", err)
	}
}

func TestStoreCarriesLevel(t *testing.T) {
	db := storagetest.OpenInMemory(t)
	tb := replay(NewTable(), goldenCommands())
	write := func() {
		t.Helper()
		b := db.NewBatch()
		defer b.Discard()
		tb.WriteChanges(b)
		if err := b.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	write()
	if l, err := StoredLevel(db); err != nil || l != LevelBaseline {
		t.Fatalf("stored level before any level entry: %d, %v", l, err)
	}
	hasKey := func() bool {
		found := false
		_ = db.Scan(keyLevel, func(_, _ []byte) error { found = true; return nil })
		return found
	}
	if hasKey() {
		t.Fatal("m/level written at the baseline: a build without the gate would see a key it never wrote")
	}
	tb.ApplyLevel(tb.applied+1, EncodeLevel(LevelGate))
	write()
	if l, err := StoredLevel(db); err != nil || l != LevelGate {
		t.Fatalf("stored level after the entry: %d, %v", l, err)
	}
	got, err := LoadStore(db)
	if err != nil || got.Level() != LevelGate || !bytes.Equal(got.StateBytes(), tb.StateBytes()) {
		t.Fatalf("loaded level %d, %v", got.Level(), err)
	}
	// A store a newer build raised further cannot be loaded by this one.
	b := db.NewBatch()
	b.Set(keyLevel, encodeUint(MaxLevel+1))
	if err := b.Commit(); err != nil {
		t.Fatal(err)
	}
	if l, err := StoredLevel(db); err != nil || l != MaxLevel+1 {
		t.Fatalf("stored level: %d, %v", l, err)
	}
	if _, err := LoadStore(db); !errors.Is(err, ErrLevelUnreadable) {
		t.Fatalf("load of a store above this build's level: %v", err)
	}
}

// Replicas that apply the same log, level entries included, hold the
// same bytes; the level is no input to any lock command.
func TestLevelEntriesDeterministic(t *testing.T) {
	cmds := randomCommands(7, 300)
	a, b := NewTable(), NewTable()
	for i, c := range cmds {
		index := uint64(i + 1)
		if i == 100 {
			a.ApplyLevel(index, EncodeLevel(LevelGate))
			b.ApplyEncoded(index, EncodeLevel(LevelGate))
			continue
		}
		a.Apply(index, c)
		b.ApplyEncoded(index, c.Encode())
	}
	if !bytes.Equal(a.StateBytes(), b.StateBytes()) || a.Level() != LevelGate {
		t.Fatal("replicas diverged")
	}
	// The same commands without the level entry change the locks alike.
	c := NewTable()
	for i, cmd := range cmds {
		if i != 100 {
			c.Apply(uint64(i+1), cmd)
		}
	}
	if !reflect.DeepEqual(a.Locks(), c.Locks()) || a.Fence() != c.Fence() || a.Clock() != c.Clock() {
		t.Fatal("the level changed what lock commands did")
	}
}
