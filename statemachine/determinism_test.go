package statemachine

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// randomCommands produces a reproducible stream over a few keys, owners
// and connections, with clocks that mostly advance and sometimes lag, so
// leases, deadlines, hand-offs, cleanups and force releases all happen.
func randomCommands(seed uint64, n int) []Command {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	keys := []string{"a", "b", "c"}
	owners := []string{"o1", "o2", "o3", "o4", "o5"}
	conns := []string{"c1", "c2", "c3"}
	kinds := []Kind{KindNacosLock, KindReentrant, KindNonReentrant}
	now := int64(1_000)
	out := make([]Command, 0, n)
	for range n {
		now += r.Int64N(300)
		stamp := now - r.Int64N(200) // proposers' clocks disagree a little
		c := Command{
			NowMs:  stamp,
			Kind:   kinds[r.IntN(len(kinds))],
			Key:    keys[r.IntN(len(keys))],
			Owner:  owners[r.IntN(len(owners))],
			ConnID: conns[r.IntN(len(conns))],
		}
		switch p := r.IntN(100); {
		case p < 40:
			c.Op, c.LeaseMs = OpAcquire, 200+r.Int64N(2000)
			if r.IntN(2) == 0 {
				c.WaitMs = r.Int64N(3000)
			}
			if r.IntN(3) == 0 { // the gateway's limits (command version 2)
				c.MaxWaiters, c.MaxLocks = uint32(1+r.IntN(3)), uint64(2+r.IntN(3))
			}
		case p < 65:
			c.Op = OpRelease
		case p < 75:
			c.Op, c.LeaseMs = OpRenew, 200+r.Int64N(2000)
		case p < 85:
			c.Op = OpCancelWait
		case p < 93:
			c.Op, c.Token = OpExpire, uint64(r.IntN(len(out)+1))
		case p < 97:
			c.Op = OpCleanupConnection
		default:
			c.Op = OpForceRelease // half of them name a grant, most likely a stale one
			if r.IntN(2) == 0 {
				c.Token = uint64(r.IntN(len(out) + 1))
			}
		}
		out = append(out, c)
	}
	return out
}

// Odd seeds run at this build's level (its rules for an owner that moves
// to another connection), even ones at the baseline.
func TestReplicasReachIdenticalState(t *testing.T) {
	pending := 0
	for seed := uint64(1); seed <= 20; seed++ {
		cmds := randomCommands(seed, 2000)
		a, b := NewTable(), NewTable()
		if seed%2 == 1 {
			a.ApplyLevel(0, EncodeLevel(MaxLevel))
			b.ApplyLevel(0, EncodeLevel(MaxLevel))
		}
		for i, c := range cmds {
			ra := a.ApplyEncoded(uint64(i+1), c.Encode())
			rb := b.ApplyEncoded(uint64(i+1), c.Encode())
			if ra != rb {
				t.Fatalf("seed %d entry %d: results differ %+v vs %+v", seed, i+1, ra, rb)
			}
			if ra.Code == CodeClaimPending {
				pending++
			}
			checkInvariants(t, a)
			if (i+1)%500 == 0 && !bytes.Equal(a.StateBytes(), b.StateBytes()) {
				t.Fatalf("seed %d entry %d: state bytes differ", seed, i+1)
			}
		}
		if !bytes.Equal(a.StateBytes(), b.StateBytes()) {
			t.Fatalf("seed %d: final state bytes differ", seed)
		}
	}
	if pending == 0 {
		t.Fatal("no ACQUIRE waited for a claim on another connection: the level-3 seeds prove little")
	}
}

func TestSnapshotRoundTrip(t *testing.T) {
	tb := NewTable()
	for i, c := range randomCommands(7, 3000) {
		tb.Apply(uint64(i+1), c)
	}
	if tb.Stats().Locks == 0 {
		t.Fatal("test stream left no locks; pick another seed")
	}
	state := tb.StateBytes()
	got, err := readSnapshot(bytes.NewReader(state))
	if err != nil {
		t.Fatalf("read snapshot: %v", err)
	}
	if !bytes.Equal(got.StateBytes(), state) {
		t.Fatal("snapshot round trip changed the state")
	}
	checkInvariants(t, got)
	// The restored table keeps working exactly like the original.
	more := randomCommands(8, 500)
	for i, c := range more {
		idx := tb.applied + uint64(i) + 1
		if ra, rb := tb.Apply(idx, c), got.Apply(idx, c); ra != rb {
			t.Fatalf("after restore, entry %d: %+v vs %+v", idx, ra, rb)
		}
	}
	if !bytes.Equal(got.StateBytes(), tb.StateBytes()) {
		t.Fatal("restored table diverged")
	}
}

func TestSnapshotRejectsCorruption(t *testing.T) {
	tb := NewTable()
	for i, c := range randomCommands(3, 400) {
		tb.Apply(uint64(i+1), c)
	}
	state := tb.StateBytes()
	cases := map[string][]byte{
		"empty":      nil,
		"bad magic":  append([]byte("not-a-snapshot\n"), state[len(snapshotMagic):]...),
		"future":     append([]byte(snapshotMagic), 9),
		"truncated":  state[:len(state)-3],
		"trailing":   append(bytes.Clone(state), 0),
		"no records": state[:len(snapshotMagic)+1],
	}
	for name, b := range cases {
		if _, err := readSnapshot(bytes.NewReader(b)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestFencingTokensIncreasePerKey(t *testing.T) {
	tb := NewTable()
	last := map[lockID]uint64{}
	for i, c := range randomCommands(11, 5000) {
		tb.Apply(uint64(i+1), c)
		for id, l := range tb.lockMap() {
			if l.held() && l.token < last[id] {
				t.Fatalf("entry %d: token for %v went back from %d to %d", i+1, id, last[id], l.token)
			}
			if l.held() {
				last[id] = l.token
			}
		}
	}
}

func FuzzApplyCommand(f *testing.F) {
	for _, c := range randomCommands(5, 40) {
		f.Add(c.Encode())
	}
	f.Add([]byte{})
	f.Add([]byte{commandVersion, byte(OpAcquire), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	for _, e := range batched(randomCommands(7, 60), 4) {
		if IsBatch(e) {
			f.Add(e)
		}
	}
	f.Add(EncodeLevel(LevelGate))
	f.Add(EncodeLevel(MaxLevel + 1))
	base := randomCommands(6, 300)
	f.Fuzz(func(t *testing.T, data []byte) {
		if IsBatch(data) { // a coalesced entry
			tb := NewTable()
			for i, bc := range base {
				tb.Apply(uint64(i+1), bc)
			}
			before := tb.StateBytes()
			rs := tb.ApplyBatch(uint64(len(base)+1), data)
			if _, _, err := decodeBatch(data); (err == nil) != (rs != nil) {
				t.Fatalf("frame error %v but %d results", err, len(rs))
			}
			if rs == nil {
				tb.applied = uint64(len(base))
				if !bytes.Equal(tb.StateBytes(), before) {
					t.Fatal("a rejected batch changed the table")
				}
			}
			if back, err := DecodeResults(EncodeResults(rs)); rs != nil && (err != nil || fmt.Sprint(back) != fmt.Sprint(rs)) {
				t.Fatalf("results round trip: %v %v", back, err)
			}
			checkInvariants(t, tb)
			return
		}
		if IsLevelEntry(data) { // a cluster level entry: only the level may change
			tb := NewTable()
			for i, bc := range base {
				tb.Apply(uint64(i+1), bc)
			}
			before := tb.Stats()
			res := tb.ApplyEncoded(uint64(len(base)+1), data)
			l, err := DecodeLevel(data)
			valid := err == nil && l <= MaxLevel
			if valid != (res.Code == CodeOK) {
				t.Fatalf("level entry (level %d, %v) gave %+v", l, err, res)
			}
			after := tb.Stats()
			after.Applied, after.Level = before.Applied, before.Level
			if after != before {
				t.Fatalf("a level entry changed more than the level: %+v -> %+v", before, tb.Stats())
			}
			if want := max(before.Level, l); valid && tb.Level() != want {
				t.Fatalf("level %d after an entry of %d, want %d", tb.Level(), l, want)
			}
			checkInvariants(t, tb)
			return
		}
		c, err := DecodeCommand(data)
		if err == nil {
			if back, err := DecodeCommand(c.Encode()); err != nil || back != c {
				t.Fatalf("decode(encode(x)) = %+v, %v; want %+v", back, err, c)
			}
		}
		tb := NewTable()
		for i, bc := range base {
			tb.Apply(uint64(i+1), bc)
		}
		before := tb.StateBytes()
		res := tb.ApplyEncoded(uint64(len(base)+1), data)
		if err != nil || res.Code == CodeMalformed {
			if res.Code != CodeMalformed {
				t.Fatalf("undecodable entry gave %+v", res)
			}
			tb.applied = uint64(len(base)) // the only thing a rejected entry may move
			if !bytes.Equal(tb.StateBytes(), before) {
				t.Fatal("a rejected entry changed the table")
			}
		}
		checkInvariants(t, tb)
	})
}
