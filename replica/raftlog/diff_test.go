package raftlog

// A randomized differential test: one random sequence of the calls
// dragonboat makes on its log is applied to our Log, to dragonboat's own
// tan log (plugin/tan) and to a small in-memory model of dragonboat's
// pebble log (internal/logdb/db.go and plain.go), whose semantics our Log
// says it follows, and what each returns is compared after every step.
//
// tan's answers differ from pebble's in ways dragonboat does not see, so
// our Log is held to the model exactly where the two differ and to tan
// only on what dragonboat reads (see diffRun.checkShard):
//
//   - ReadRaftState: pebble (and so our Log) returns the first entry at
//     or after the snapshot index as FirstIndex, tan returns the snapshot
//     index + 1, and tan returns FirstIndex 0 where there is no entry past
//     the snapshot. dragonboat (node.go replayLog) applies the snapshot
//     first, which puts its LogReader's marker at the snapshot index, and
//     then SetRange(FirstIndex, EntryCount) cuts whatever is at or below
//     the marker and panics on a gap above it. So the range compared is
//     the entries above the snapshot index, and on our Log we check
//     separately what SetRange needs: FirstIndex <= snapshot index + 1
//     when EntryCount > 0, and FirstIndex == snapshot index (pebble's
//     answer) when it is 0.
//   - RemoveEntriesTo(i): pebble keeps entry i, tan does not serve it
//     (IterateEntries returns nothing for low <= i). dragonboat calls it
//     only after LogReader.Compact(i), after which it reads above i only.
//     So tan is compared above i; our Log is also compared to the model
//     from i on.
//   - Entries below a snapshot the node restored from its leader (an
//     Update carrying the snapshot): tan keeps the older entries (with a
//     gap before the new ones), pebble keeps their keys too, our Log drops
//     them. dragonboat's LogReader.ApplySnapshot moves the marker to the
//     snapshot index, so only entries above it are compared.
//   - A restored snapshot saved with no entries, at an index below the
//     last index (the follower's conflicting tail): pebble makes the
//     snapshot index the last index, tan keeps the old entries past it
//     until new ones overwrite them. Until then our Log is compared to the
//     model only (tanStale).
//   - Our Log does not write RemoveEntriesTo down, so entries below the
//     removal point come back when it reopens; they are below the marker
//     and are not compared.

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/logger"
	"github.com/lni/dragonboat/v4/plugin/tan"
	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
	"github.com/lni/vfs"
)

const (
	diffReplica = 1
	diffSteps   = 300
)

var diffSeeds = []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}

// diffShard is one shard's Raft-side state (what the generator may do
// next) and the model of what dragonboat's pebble log holds for it.
type diffShard struct {
	id uint64

	// Raft side.
	term, vote, commit uint64
	saved              pb.State // the last state sent non-empty

	// The pebble model.
	hasState bool
	state    pb.State
	keys     map[uint64]pb.Entry // every entry key not deleted, stale ones included
	hasMax   bool
	maxIndex uint64
	snap     pb.Snapshot
	bs       *pb.Bootstrap

	// What dragonboat reads from: above max(removedTo, restoredAt).
	removedTo  uint64
	restoredAt uint64
	// tan still holds a conflicting tail past a restored snapshot.
	tanStale bool
}

func (s *diffShard) last() uint64 {
	if !s.hasMax {
		return 0
	}
	return s.maxIndex
}

// saveModel applies an update as dragonboat's pebble log does
// (db.saveRaftState).
func (s *diffShard) saveModel(ud pb.Update) {
	if !pb.IsEmptyState(ud.State) {
		s.state, s.hasState = ud.State, true
	}
	if !pb.IsEmptySnapshot(ud.Snapshot) && ud.Snapshot.Index > s.snap.Index {
		s.snap = ud.Snapshot
		s.maxIndex, s.hasMax = ud.Snapshot.Index, true
	}
	for _, e := range ud.EntriesToSave {
		s.keys[e.Index] = e
	}
	if n := len(ud.EntriesToSave); n > 0 {
		s.maxIndex, s.hasMax = ud.EntriesToSave[n-1].Index, true
	}
}

// iterateModel is plainEntries.iterate: consecutive keys from low, below
// min(high, max+1), stopping after the entry that takes size (counted from
// diffSize0) past maxSize. It returns the size of the entries alone.
func (s *diffShard) iterateModel(low, high, maxSize uint64) ([]pb.Entry, uint64) {
	if !s.hasMax {
		return nil, 0
	}
	high = min(high, s.maxIndex+1)
	var out []pb.Entry
	size := uint64(diffSize0)
	for i := low; i < high; i++ {
		e, ok := s.keys[i]
		if !ok {
			break
		}
		out = append(out, e)
		size += uint64(e.SizeUpperLimit())
		if size > maxSize {
			break
		}
	}
	return out, size - diffSize0
}

// diffSize0 is the size IterateEntries is called with: it counts on from it.
const diffSize0 = 7

type diffRun struct {
	t     *testing.T
	seed  int64
	step  int
	rng   *rand.Rand
	dir   string
	opts  Options
	ours  *Log
	tan   raftio.ILogDB
	sh    []*diffShard
	ops   []string
	label string // the current step's operation
}

func TestDiffAgainstTan(t *testing.T) {
	logger.GetLogger("tan").SetLevel(logger.WARNING)
	for _, seed := range diffSeeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			r := newDiffRun(t, seed)
			for r.step = 1; r.step <= diffSteps; r.step++ {
				r.randomOp()
				r.check()
			}
		})
	}
}

func newDiffRun(t *testing.T, seed int64) *diffRun {
	r := &diffRun{
		t:    t,
		seed: seed,
		rng:  rand.New(rand.NewSource(seed)),
		dir:  t.TempDir() + "/x",
		opts: Options{SegmentSize: 64 << 10},
	}
	var err error
	if r.ours, err = Open(r.dir, r.opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.ours.Close() })

	var cfg config.NodeHostConfig
	cfg.Expert.FS = vfs.NewMem()
	cfg.Expert.LogDB = config.GetTinyMemLogDBConfig()
	cfg.Expert.LogDB.KVWriteBufferSize = 256 << 10 // tan's per-worker buffers; it grows them when needed
	if r.tan, err = tan.Factory.Create(cfg, nil, []string{"/tan"}, []string{"/tan"}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.tan.Close() })

	for _, id := range []uint64{1, 2} {
		r.sh = append(r.sh, &diffShard{id: id, term: 1, vote: 1, keys: make(map[uint64]pb.Entry)})
	}
	return r
}

// failf stops the run, naming the seed, the step and the steps before it.
func (r *diffRun) failf(format string, args ...any) {
	r.t.Helper()
	from := max(0, len(r.ops)-30)
	r.t.Fatalf("seed %d step %d (%s): %s\nsteps %d..%d:\n  %s", r.seed, r.step, r.label,
		fmt.Sprintf(format, args...), from+1, len(r.ops), strings.Join(r.ops[from:], "\n  "))
}

func (r *diffRun) must(what string, err error) {
	r.t.Helper()
	if err != nil {
		r.failf("%s: %v", what, err)
	}
}

func (r *diffRun) logOp(format string, args ...any) {
	r.label = fmt.Sprintf(format, args...)
	r.ops = append(r.ops, r.label)
}

func (r *diffRun) intn(n uint64) uint64 {
	if n == 0 {
		return 0
	}
	return uint64(r.rng.Int63n(int64(n)))
}

// between returns a random value in [lo, hi].
func (r *diffRun) between(lo, hi uint64) uint64 { return lo + r.intn(hi-lo+1) }

func (r *diffRun) randomOp() {
	switch k := r.rng.Intn(100); {
	case k < 62:
		r.opSave()
	case k < 72:
		r.opSaveSnapshots()
	case k < 84:
		r.opRemove()
	case k < 90:
		r.opBootstrap()
	case k < 94:
		r.opReopen()
	default:
		r.opNothing()
	}
}

func (r *diffRun) pickShards() []*diffShard {
	switch r.rng.Intn(3) {
	case 0:
		return r.sh[:1]
	case 1:
		return r.sh[1:]
	default:
		return r.sh
	}
}

func (r *diffRun) entries(from, n, term uint64) []pb.Entry {
	out := make([]pb.Entry, 0, n)
	types := []pb.EntryType{pb.ApplicationEntry, pb.ApplicationEntry, pb.ApplicationEntry,
		pb.EncodedEntry, pb.ConfigChangeEntry, pb.MetadataEntry}
	for i := from; i < from+n; i++ {
		size := r.rng.Intn(400)
		if r.rng.Intn(40) == 0 {
			size = 4<<10 + r.rng.Intn(12<<10) // a few records span a good part of a segment
		}
		var cmd []byte
		if size > 0 {
			cmd = make([]byte, size)
			r.rng.Read(cmd)
		}
		out = append(out, pb.Entry{
			Index:       i,
			Term:        term,
			Type:        types[r.rng.Intn(len(types))],
			Key:         r.rng.Uint64() >> r.rng.Intn(64),
			ClientID:    r.rng.Uint64() >> r.rng.Intn(64),
			SeriesID:    uint64(r.rng.Intn(1000)),
			RespondedTo: uint64(r.rng.Intn(1000)),
			Cmd:         cmd,
		})
	}
	return out
}

func (r *diffRun) snapshot(s *diffShard, index, term uint64) pb.Snapshot {
	return pb.Snapshot{
		Index:       index,
		Term:        term,
		Type:        pb.OnDiskStateMachine,
		Filepath:    "x",
		FileSize:    r.intn(1 << 20),
		ShardID:     s.id,
		OnDiskIndex: r.intn(index + 1),
		Membership: pb.Membership{
			ConfigChangeId: index,
			Addresses:      map[uint64]string{1: "a1", 2: fmt.Sprintf("a2-%d", index)},
		},
	}
}

// newLeader moves the shard to a new term, as a leader change does.
func (r *diffRun) newLeader(s *diffShard) {
	s.term += 1 + r.intn(2)
	s.vote = r.between(1, 3)
}

// genUpdate makes the next Update dragonboat could save for s and
// describes it.
func (r *diffRun) genUpdate(s *diffShard) (pb.Update, string) {
	ud := pb.Update{ShardID: s.id, ReplicaID: diffReplica}
	last := s.last()
	var desc string
	switch k := r.rng.Intn(100); {
	case k < 62 || !s.hasState:
		// Append at the end, as a follower does from its leader.
		if r.rng.Intn(15) == 0 {
			r.newLeader(s)
		}
		n := r.between(1, 8)
		ud.EntriesToSave = r.entries(last+1, n, s.term)
		s.commit = r.between(s.commit, last+n)
		desc = fmt.Sprintf("append %d..%d", last+1, last+n)
	case k < 76 && s.commit < last:
		// A new leader overwrites the uncommitted suffix from i on; the
		// new run may end before the old last index.
		r.newLeader(s)
		i := r.between(s.commit+1, last)
		n := r.between(1, 8)
		ud.EntriesToSave = r.entries(i, n, s.term)
		s.commit = r.between(s.commit, i+n-1)
		desc = fmt.Sprintf("overwrite %d..%d (last was %d)", i, i+n-1, last)
	case k < 88:
		// Restore from a snapshot the leader sent: past the commit
		// index, below, at or past the last index; with the entries
		// that followed it, or none.
		if r.rng.Intn(2) == 0 {
			r.newLeader(s)
		}
		idx := r.between(s.commit+1, last+10)
		ud.Snapshot = r.snapshot(s, idx, s.term)
		s.commit = idx
		desc = fmt.Sprintf("restore ss=%d (last was %d)", idx, last)
		if r.rng.Intn(4) != 0 {
			n := r.between(1, 5)
			ud.EntriesToSave = r.entries(idx+1, n, s.term)
			s.commit = r.between(idx, idx+n)
			desc += fmt.Sprintf(" + %d..%d", idx+1, idx+n)
		} else if idx < last {
			s.tanStale = true
		}
		s.restoredAt = idx
	case k < 96:
		// The state alone: a vote, a new term or the commit index.
		if r.rng.Intn(3) == 0 {
			r.newLeader(s)
		}
		s.commit = r.between(s.commit, last)
		desc = "state"
	default:
		desc = "unchanged"
	}
	st := pb.State{Term: s.term, Vote: s.vote, Commit: s.commit}
	if st != s.saved || r.rng.Intn(3) != 0 {
		ud.State = st // an unchanged state is sometimes left out, as raft does
	}
	if !pb.IsEmptyState(ud.State) {
		s.saved = ud.State
	}
	if len(ud.EntriesToSave) > 0 {
		s.tanStale = false // entries from the new last index on overwrite tan's tail
	}
	desc = fmt.Sprintf("s%d %s state=%+v", s.id, desc, ud.State)
	return ud, desc
}

func (r *diffRun) opSave() {
	var uds []pb.Update
	var descs []string
	for _, s := range r.pickShards() {
		ud, d := r.genUpdate(s)
		uds = append(uds, ud)
		descs = append(descs, d)
	}
	r.logOp("SaveRaftState [%s]", strings.Join(descs, "; "))
	r.must("ours SaveRaftState", r.ours.SaveRaftState(uds, uds[0].ShardID))
	r.must("tan SaveRaftState", r.tan.SaveRaftState(uds, uds[0].ShardID))
	for _, ud := range uds {
		r.sh[ud.ShardID-1].saveModel(ud)
	}
}

func (r *diffRun) opNothing() {
	s := r.sh[r.rng.Intn(len(r.sh))]
	ud := pb.Update{ShardID: s.id, ReplicaID: diffReplica}
	if r.rng.Intn(2) == 0 {
		ud.State = s.saved
	}
	r.logOp("SaveRaftState [s%d nothing new, state=%+v]", s.id, ud.State)
	r.must("ours SaveRaftState", r.ours.SaveRaftState([]pb.Update{ud}, s.id))
	r.must("tan SaveRaftState", r.tan.SaveRaftState([]pb.Update{ud}, s.id))
	s.saveModel(ud)
}

// opSaveSnapshots saves snapshots the node took itself, at or below its
// commit index; sometimes one older than the latest, which is ignored.
func (r *diffRun) opSaveSnapshots() {
	var uds []pb.Update
	var descs []string
	for _, s := range r.pickShards() {
		var idx uint64
		switch {
		case s.commit > s.snap.Index && r.rng.Intn(5) != 0:
			idx = r.between(s.snap.Index+1, s.commit)
		case s.snap.Index > 0:
			idx = r.between(1, s.snap.Index) // stale
		default:
			continue
		}
		term := s.term
		if e, ok := s.keys[idx]; ok && idx > s.restoredAt {
			term = e.Term
		}
		uds = append(uds, pb.Update{ShardID: s.id, ReplicaID: diffReplica, Snapshot: r.snapshot(s, idx, term)})
		descs = append(descs, fmt.Sprintf("s%d ss=%d", s.id, idx))
	}
	if len(uds) == 0 {
		r.logOp("SaveSnapshots [] (none due)")
		return
	}
	r.logOp("SaveSnapshots [%s]", strings.Join(descs, "; "))
	r.must("ours SaveSnapshots", r.ours.SaveSnapshots(uds))
	r.must("tan SaveSnapshots", r.tan.SaveSnapshots(uds))
	for _, ud := range uds {
		if s := r.sh[ud.ShardID-1]; ud.Snapshot.Index > s.snap.Index {
			s.snap = ud.Snapshot
		}
	}
}

// opRemove drops entries as dragonboat does after a snapshot: to an index
// at or below the snapshot's (snapshot index - CompactionOverhead).
func (r *diffRun) opRemove() {
	s := r.sh[r.rng.Intn(len(r.sh))]
	if s.snap.Index <= s.removedTo {
		r.logOp("RemoveEntriesTo s%d: nothing due", s.id)
		return
	}
	idx := s.snap.Index
	if r.rng.Intn(3) != 0 {
		idx = r.between(s.removedTo+1, s.snap.Index)
	}
	r.logOp("RemoveEntriesTo+CompactEntriesTo s%d %d", s.id, idx)
	r.must("ours RemoveEntriesTo", r.ours.RemoveEntriesTo(s.id, diffReplica, idx))
	r.must("tan RemoveEntriesTo", r.tan.RemoveEntriesTo(s.id, diffReplica, idx))
	done, err := r.ours.CompactEntriesTo(s.id, diffReplica, idx)
	r.must("ours CompactEntriesTo", err)
	<-done
	done, err = r.tan.CompactEntriesTo(s.id, diffReplica, idx)
	r.must("tan CompactEntriesTo", err)
	<-done
	for i := range s.keys {
		if i < idx {
			delete(s.keys, i)
		}
	}
	s.removedTo = idx
}

func (r *diffRun) opBootstrap() {
	s := r.sh[r.rng.Intn(len(r.sh))]
	bs := pb.Bootstrap{
		Addresses: map[uint64]string{1: "n1", uint64(r.between(2, 5)): fmt.Sprintf("n-%d", r.step)},
		Join:      r.rng.Intn(2) == 0,
		Type:      []pb.StateMachineType{pb.RegularStateMachine, pb.OnDiskStateMachine}[r.rng.Intn(2)],
	}
	r.logOp("SaveBootstrapInfo s%d %+v", s.id, bs)
	r.must("ours SaveBootstrapInfo", r.ours.SaveBootstrapInfo(s.id, diffReplica, bs))
	r.must("tan SaveBootstrapInfo", r.tan.SaveBootstrapInfo(s.id, diffReplica, bs))
	s.bs = &bs
}

func (r *diffRun) opReopen() {
	r.logOp("reopen ours")
	r.must("ours Close", r.ours.Close())
	l, err := Open(r.dir, r.opts)
	r.must("ours Open", err)
	r.ours = l
}

func (r *diffRun) check() {
	r.t.Helper()
	var want []raftio.NodeInfo
	for _, s := range r.sh {
		if s.bs != nil {
			want = append(want, raftio.NodeInfo{ShardID: s.id, ReplicaID: diffReplica})
		}
	}
	got, err := r.ours.ListNodeInfo()
	r.must("ours ListNodeInfo", err)
	tgot, err := r.tan.ListNodeInfo()
	r.must("tan ListNodeInfo", err)
	byNode := func(a, b raftio.NodeInfo) int {
		if a.ShardID != b.ShardID {
			return int(a.ShardID) - int(b.ShardID)
		}
		return int(a.ReplicaID) - int(b.ReplicaID)
	}
	slices.SortFunc(got, byNode)
	slices.SortFunc(tgot, byNode)
	if !slices.Equal(got, want) || !slices.Equal(tgot, want) {
		r.failf("ListNodeInfo: ours %v, tan %v, want %v", got, tgot, want)
	}
	for _, s := range r.sh {
		r.checkShard(s)
	}
}

func (r *diffRun) checkShard(s *diffShard) {
	r.t.Helper()
	sid := s.id

	// Bootstrap info.
	ob, oerr := r.ours.GetBootstrapInfo(sid, diffReplica)
	tb, terr := r.tan.GetBootstrapInfo(sid, diffReplica)
	if s.bs == nil {
		if !errors.Is(oerr, raftio.ErrNoBootstrapInfo) || !errors.Is(terr, raftio.ErrNoBootstrapInfo) {
			r.failf("s%d GetBootstrapInfo: ours %+v %v, tan %+v %v, want ErrNoBootstrapInfo", sid, ob, oerr, tb, terr)
		}
	} else if oerr != nil || terr != nil || !diffBootstrapEqual(ob, *s.bs) || !diffBootstrapEqual(tb, *s.bs) {
		r.failf("s%d GetBootstrapInfo: ours %+v %v, tan %+v %v, want %+v", sid, ob, oerr, tb, terr, *s.bs)
	}

	// The latest snapshot.
	oss, oerr := r.ours.GetSnapshot(sid, diffReplica)
	tss, terr := r.tan.GetSnapshot(sid, diffReplica)
	if oerr != nil || terr != nil || !diffSnapshotEqual(oss, s.snap) || !diffSnapshotEqual(tss, s.snap) {
		r.failf("s%d GetSnapshot: ours %s %v, tan %s %v, want %s", sid,
			diffSnapshotString(oss), oerr, diffSnapshotString(tss), terr, diffSnapshotString(s.snap))
	}
	ssIndex := s.snap.Index

	// The Raft state, as node.replayLog reads it.
	ors, oerr := r.ours.ReadRaftState(sid, diffReplica, ssIndex)
	trs, terr := r.tan.ReadRaftState(sid, diffReplica, ssIndex)
	if !s.hasState {
		if !errors.Is(oerr, raftio.ErrNoSavedLog) || !errors.Is(terr, raftio.ErrNoSavedLog) {
			r.failf("s%d ReadRaftState(%d): ours %+v %v, tan %+v %v, want ErrNoSavedLog", sid, ssIndex, ors, oerr, trs, terr)
		}
		return
	}
	if oerr != nil || terr != nil {
		r.failf("s%d ReadRaftState(%d): ours %+v %v, tan %+v %v", sid, ssIndex, ors, oerr, trs, terr)
	}
	if ors.State != s.state || trs.State != s.state {
		r.failf("s%d ReadRaftState(%d).State: ours %+v, tan %+v, want %+v", sid, ssIndex, ors.State, trs.State, s.state)
	}
	// What LogReader.SetRange needs of the range (see the file's comment).
	if ors.EntryCount == 0 && ors.FirstIndex != ssIndex ||
		ors.EntryCount > 0 && (ors.FirstIndex < ssIndex || ors.FirstIndex > ssIndex+1) {
		r.failf("s%d ReadRaftState(%d): ours FirstIndex %d EntryCount %d: want FirstIndex %d, or %d..%d with entries",
			sid, ssIndex, ors.FirstIndex, ors.EntryCount, ssIndex, ssIndex, ssIndex+1)
	}
	wantLo, wantHi := uint64(0), uint64(0) // the entries above the snapshot, if any
	if s.hasMax && s.maxIndex > ssIndex {
		wantLo, wantHi = ssIndex+1, s.maxIndex
	}
	if lo, hi := diffAboveSnapshot(ors, ssIndex); lo != wantLo || hi != wantHi {
		r.failf("s%d ReadRaftState(%d): ours %d+%d: entries above the snapshot %d..%d, want %d..%d",
			sid, ssIndex, ors.FirstIndex, ors.EntryCount, lo, hi, wantLo, wantHi)
	}
	if lo, hi := diffAboveSnapshot(trs, ssIndex); !s.tanStale && (lo != wantLo || hi != wantHi) {
		r.failf("s%d ReadRaftState(%d): tan %d+%d: entries above the snapshot %d..%d, want %d..%d",
			sid, ssIndex, trs.FirstIndex, trs.EntryCount, lo, hi, wantLo, wantHi)
	}

	// The entries dragonboat may read: above max(removal point, restored
	// snapshot), up to the last index.
	if !s.hasMax {
		return
	}
	last := s.maxIndex
	lo := max(s.removedTo, s.restoredAt) + 1
	if lo <= last {
		want, wsize := s.iterateModel(lo, last+1, math.MaxUint64)
		if uint64(len(want)) != last-lo+1 {
			r.failf("test model: s%d holds %d entries in %d..%d", sid, len(want), lo, last)
		}
		// Reading all of tan's log on every step is most of the test's
		// time: tan is read whole every few steps, and its tail on every
		// step; our Log is read whole on every step.
		whole := r.step%8 == 0 || r.step == diffSteps
		r.compareIterate(s, lo, last+1, math.MaxUint64, want, wsize, whole)
		if !whole {
			from := max(lo, last-min(last, 15))
			want, wsize = s.iterateModel(from, last+1, math.MaxUint64)
			r.compareIterate(s, from, last+1, math.MaxUint64, want, wsize, true)
		}

		a := r.between(lo, last)
		b := r.between(a+1, last+3)
		maxSize := r.between(1, 3000)
		want, wsize = s.iterateModel(a, b, maxSize)
		r.compareIterate(s, a, b, maxSize, want, wsize, true)
	}
	// pebble keeps the entry at the removal point; tan does not serve it.
	if s.removedTo > s.restoredAt && s.removedTo >= 1 && s.removedTo <= last {
		want, wsize := s.iterateModel(s.removedTo, last+1, math.MaxUint64)
		r.compareIterate(s, s.removedTo, last+1, math.MaxUint64, want, wsize, false)
	}
}

// compareIterate checks IterateEntries(low, high, maxSize) on our Log, and
// on tan if withTan, against the model's answer.
func (r *diffRun) compareIterate(s *diffShard, low, high, maxSize uint64, want []pb.Entry, wsize uint64, withTan bool) {
	r.t.Helper()
	// A non-empty slice in: the results are appended to it. (tan panics
	// unless its last entry is the one before low.)
	pre := []pb.Entry{{Index: low - 1}}
	got, size, err := r.ours.IterateEntries(slices.Clone(pre), diffSize0, s.id, diffReplica, low, high, maxSize)
	r.must(fmt.Sprintf("ours IterateEntries(s%d, %d, %d, %d)", s.id, low, high, maxSize), err)
	if d := diffEntries(got, pre, size, want, wsize); d != "" {
		r.failf("s%d IterateEntries(%d, %d, maxSize %d): ours: %s", s.id, low, high, maxSize, d)
	}
	if !withTan || s.tanStale {
		return
	}
	got, size, err = r.tan.IterateEntries(slices.Clone(pre), diffSize0, s.id, diffReplica, low, high, maxSize)
	r.must(fmt.Sprintf("tan IterateEntries(s%d, %d, %d, %d)", s.id, low, high, maxSize), err)
	if d := diffEntries(got, pre, size, want, wsize); d != "" {
		r.failf("s%d IterateEntries(%d, %d, maxSize %d): tan: %s", s.id, low, high, maxSize, d)
	}
}

// diffEntries describes how got (after the entries pre, with size counted
// from diffSize0) differs from want, or returns "".
func diffEntries(got, pre []pb.Entry, size uint64, want []pb.Entry, wsize uint64) string {
	if len(got) < len(pre) || got[0].Index != pre[0].Index {
		return fmt.Sprintf("the entries passed in are gone: %s", diffIndexes(got))
	}
	got = got[len(pre):]
	if len(got) != len(want) {
		return fmt.Sprintf("entries %s, want %s", diffIndexes(got), diffIndexes(want))
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Index != w.Index || g.Term != w.Term || g.Type != w.Type || g.Key != w.Key ||
			g.ClientID != w.ClientID || g.SeriesID != w.SeriesID || g.RespondedTo != w.RespondedTo ||
			!bytes.Equal(g.Cmd, w.Cmd) {
			return fmt.Sprintf("entry %d: got {Index %d Term %d Type %d Key %d len(Cmd) %d}, want {Index %d Term %d Type %d Key %d len(Cmd) %d}",
				i, g.Index, g.Term, g.Type, g.Key, len(g.Cmd), w.Index, w.Term, w.Type, w.Key, len(w.Cmd))
		}
	}
	if size != diffSize0+wsize {
		return fmt.Sprintf("size %d, want %d", size, diffSize0+wsize)
	}
	return ""
}

func diffIndexes(es []pb.Entry) string {
	if len(es) == 0 {
		return "[]"
	}
	return fmt.Sprintf("[%d..%d] (%d)", es[0].Index, es[len(es)-1].Index, len(es))
}

// diffAboveSnapshot returns the range of entries a ReadRaftState answer
// gives above the snapshot index, or 0, 0.
func diffAboveSnapshot(rs raftio.RaftState, ssIndex uint64) (uint64, uint64) {
	if rs.EntryCount == 0 {
		return 0, 0
	}
	last := rs.FirstIndex + rs.EntryCount - 1
	if last <= ssIndex {
		return 0, 0
	}
	return max(rs.FirstIndex, ssIndex+1), last
}

func diffBootstrapEqual(a, b pb.Bootstrap) bool {
	return a.Join == b.Join && a.Type == b.Type && maps.Equal(a.Addresses, b.Addresses)
}

func diffSnapshotEqual(a, b pb.Snapshot) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type && a.Filepath == b.Filepath &&
		a.FileSize == b.FileSize && a.ShardID == b.ShardID && a.OnDiskIndex == b.OnDiskIndex &&
		a.Membership.ConfigChangeId == b.Membership.ConfigChangeId &&
		maps.Equal(a.Membership.Addresses, b.Membership.Addresses)
}

func diffSnapshotString(s pb.Snapshot) string {
	return fmt.Sprintf("{Index %d Term %d Type %v Filepath %q FileSize %d ShardID %d OnDiskIndex %d CC %d Addresses %v}",
		s.Index, s.Term, s.Type, s.Filepath, s.FileSize, s.ShardID, s.OnDiskIndex, s.Membership.ConfigChangeId, s.Membership.Addresses)
}
