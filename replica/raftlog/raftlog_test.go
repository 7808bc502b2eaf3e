package raftlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
)

func openLog(t *testing.T, dir string, segSize int64) *Log {
	t.Helper()
	l, err := Open(dir, Options{SegmentSize: segSize})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// ents makes entries from..to (inclusive) of term, each with a Cmd that
// names it.
func ents(from, to, term uint64) []pb.Entry {
	var out []pb.Entry
	for i := from; i <= to; i++ {
		out = append(out, pb.Entry{Index: i, Term: term, Cmd: []byte(fmt.Sprintf("cmd-%d-%d", i, term))})
	}
	return out
}

func save(t *testing.T, l *Log, uds ...pb.Update) {
	t.Helper()
	if err := l.SaveRaftState(uds, 1); err != nil {
		t.Fatal(err)
	}
}

// entriesOf reads lo..hi-1 and renders them as "index/term/cmd".
func entriesOf(t *testing.T, l *Log, shard, lo, hi, maxSize uint64) []string {
	t.Helper()
	es, _, err := l.IterateEntries(nil, 0, shard, 1, lo, hi, maxSize)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range es {
		out = append(out, fmt.Sprintf("%d/%d/%s", e.Index, e.Term, e.Cmd))
	}
	return out
}

// checkAcrossReopen checks l, closes it, opens the log in dir again and
// checks that: what was saved reads back the same after a restart. The
// log returned is closed when the test ends.
func checkAcrossReopen(t *testing.T, l *Log, dir string, segSize int64, check func(*Log)) *Log {
	t.Helper()
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, dir, segSize)
	t.Cleanup(func() { l.Close() })
	check(l)
	return l
}

func want(from, to, term uint64) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("%d/%d/cmd-%d-%d", i, term, i, term))
	}
	return out
}

func eq(t *testing.T, what string, got, want any) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s:\n got %v\nwant %v", what, got, want)
	}
}

func readState(t *testing.T, l *Log, shard, snapshotIndex uint64) raftio.RaftState {
	t.Helper()
	rs, err := l.ReadRaftState(shard, 1, snapshotIndex)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestRoundTripAndReopen: what is saved reads back, and reads back the
// same after the log is closed and opened again.
func TestRoundTripAndReopen(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, 0)
	if _, err := l.ReadRaftState(1, 1, 0); !errors.Is(err, raftio.ErrNoSavedLog) {
		t.Fatalf("empty log: %v, want ErrNoSavedLog", err)
	}
	if _, err := l.GetBootstrapInfo(1, 1); !errors.Is(err, raftio.ErrNoBootstrapInfo) {
		t.Fatalf("empty log: %v, want ErrNoBootstrapInfo", err)
	}
	bs := pb.Bootstrap{Addresses: map[uint64]string{1: "a:1"}, Type: pb.OnDiskStateMachine}
	if err := l.SaveBootstrapInfo(1, 1, bs); err != nil {
		t.Fatal(err)
	}
	save(t, l, pb.Update{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1, Vote: 1, Commit: 0}, EntriesToSave: ents(1, 5, 1)})
	save(t, l, pb.Update{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1, Vote: 1, Commit: 5}},
		pb.Update{ShardID: 2, ReplicaID: 1, State: pb.State{Term: 3}, EntriesToSave: ents(1, 2, 3)})
	check := func(l *Log) {
		t.Helper()
		eq(t, "state", readState(t, l, 1, 0), raftio.RaftState{State: pb.State{Term: 1, Vote: 1, Commit: 5}, FirstIndex: 1, EntryCount: 5})
		eq(t, "entries", entriesOf(t, l, 1, 1, 6, 1<<20), want(1, 5, 1))
		eq(t, "entries of shard 2", entriesOf(t, l, 2, 1, 3, 1<<20), want(1, 2, 3))
		eq(t, "past the end", entriesOf(t, l, 1, 4, 100, 1<<20), want(4, 5, 1))
		got, err := l.GetBootstrapInfo(1, 1)
		if err != nil || got.Addresses[1] != "a:1" || got.Type != pb.OnDiskStateMachine {
			t.Fatalf("bootstrap %+v %v", got, err)
		}
		ni, _ := l.ListNodeInfo()
		eq(t, "nodes", ni, []raftio.NodeInfo{{ShardID: 1, ReplicaID: 1}})
	}
	checkAcrossReopen(t, l, dir, 0, check)
}

// TestMaxSize: iteration stops after the entry that takes the size past
// the limit, as dragonboat's own log does.
func TestMaxSize(t *testing.T) {
	l := openLog(t, t.TempDir(), 0)
	defer l.Close()
	save(t, l, pb.Update{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: ents(1, 10, 1)})
	one := pb.Entry{Index: 1, Term: 1, Cmd: []byte("cmd-1-1")}
	limit := uint64(one.SizeUpperLimit())*2 + 1
	eq(t, "limited", entriesOf(t, l, 1, 1, 11, limit), want(1, 3, 1))
	eq(t, "one at least", entriesOf(t, l, 1, 1, 11, 0), want(1, 1, 1))
}

// TestOverwriteSuffix: entries saved again from an index inside the log
// (a new leader's) replace that index and everything after it.
func TestOverwriteSuffix(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, 0)
	save(t, l, pb.Update{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: ents(1, 10, 1)})
	save(t, l, pb.Update{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 2}, EntriesToSave: ents(6, 8, 2)})
	check := func(l *Log) {
		t.Helper()
		eq(t, "state", readState(t, l, 1, 0), raftio.RaftState{State: pb.State{Term: 2}, FirstIndex: 1, EntryCount: 8})
		eq(t, "entries", entriesOf(t, l, 1, 1, 11, 1<<20), append(want(1, 5, 1), want(6, 8, 2)...))
	}
	checkAcrossReopen(t, l, dir, 0, check)
}

// TestSnapshotInUpdate: a snapshot saved with the state (one received
// from the leader) makes its index the last one; entries after it join
// it, and the range starts at the snapshot.
func TestSnapshotInUpdate(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, 0)
	save(t, l, pb.Update{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: ents(1, 10, 1)})
	ss := pb.Snapshot{Index: 100, Term: 3, Type: pb.OnDiskStateMachine, Filepath: "/x"}
	save(t, l, pb.Update{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 3, Commit: 100}, Snapshot: ss})
	eq(t, "at the snapshot", readState(t, l, 1, 100), raftio.RaftState{State: pb.State{Term: 3, Commit: 100}, FirstIndex: 100})
	save(t, l, pb.Update{ShardID: 1, ReplicaID: 1, EntriesToSave: ents(101, 104, 3)})
	check := func(l *Log) {
		t.Helper()
		got, _ := l.GetSnapshot(1, 1)
		eq(t, "snapshot", got.Index, 100)
		eq(t, "range", readState(t, l, 1, 100), raftio.RaftState{State: pb.State{Term: 3, Commit: 100}, FirstIndex: 101, EntryCount: 4})
		eq(t, "entries", entriesOf(t, l, 1, 101, 105, 1<<20), want(101, 104, 3))
		eq(t, "behind the snapshot", entriesOf(t, l, 1, 5, 7, 1<<20), []string(nil))
	}
	checkAcrossReopen(t, l, dir, 0, check)
}

// TestSaveSnapshots: a newer snapshot replaces the one held, an older one
// does not, and neither moves the last index.
func TestSaveSnapshots(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, 0)
	save(t, l, pb.Update{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: ents(1, 30, 1)})
	for _, i := range []uint64{20, 10} {
		if err := l.SaveSnapshots([]pb.Update{{ShardID: 1, ReplicaID: 1, Snapshot: pb.Snapshot{Index: i, Term: 1, Type: pb.OnDiskStateMachine}}}); err != nil {
			t.Fatal(err)
		}
	}
	check := func(l *Log) {
		t.Helper()
		got, _ := l.GetSnapshot(1, 1)
		eq(t, "snapshot", got.Index, 20)
		eq(t, "range", readState(t, l, 1, 20), raftio.RaftState{State: pb.State{Term: 1}, FirstIndex: 20, EntryCount: 11})
	}
	checkAcrossReopen(t, l, dir, 0, check)
}

func segmentFiles(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCompaction: with small segments, removing entries deletes the
// segments that held only those, and the rest replays whole: the
// checkpoint at each segment's start carries the metadata written in the
// deleted ones.
func TestCompaction(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, 1024)
	bs := pb.Bootstrap{Addresses: map[uint64]string{1: "a:1"}, Type: pb.OnDiskStateMachine}
	if err := l.SaveBootstrapInfo(1, 1, bs); err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 400; i += 4 {
		save(t, l, pb.Update{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1, Commit: i - 1}, EntriesToSave: ents(i, i+3, 1)})
	}
	before := len(segmentFiles(t, dir))
	if before < 5 {
		t.Fatalf("%d segments: the test wants several", before)
	}
	if err := l.SaveSnapshots([]pb.Update{{ShardID: 1, ReplicaID: 1, Snapshot: pb.Snapshot{Index: 350, Term: 1, Type: pb.OnDiskStateMachine}}}); err != nil {
		t.Fatal(err)
	}
	if err := l.RemoveEntriesTo(1, 1, 340); err != nil {
		t.Fatal(err)
	}
	eq(t, "the entry at the removal index stays", entriesOf(t, l, 1, 339, 342, 1<<20), []string(nil))
	eq(t, "from the removal index", entriesOf(t, l, 1, 340, 342, 1<<20), want(340, 341, 1))
	done, err := l.CompactEntriesTo(1, 1, 340)
	if err != nil {
		t.Fatal(err)
	}
	<-done
	after := len(segmentFiles(t, dir))
	if after >= before/2 {
		t.Fatalf("%d segments after compaction, %d before", after, before)
	}
	check := func(l *Log) {
		t.Helper()
		eq(t, "range", readState(t, l, 1, 350), raftio.RaftState{State: pb.State{Term: 1, Commit: 396}, FirstIndex: 350, EntryCount: 51})
		eq(t, "entries", entriesOf(t, l, 1, 350, 401, 1<<20), want(350, 400, 1))
		got, err := l.GetBootstrapInfo(1, 1)
		if err != nil || got.Addresses[1] != "a:1" {
			t.Fatalf("bootstrap after compaction: %+v %v", got, err)
		}
		ss, _ := l.GetSnapshot(1, 1)
		eq(t, "snapshot", ss.Index, 350)
	}
	l = checkAcrossReopen(t, l, dir, 1024, check)
	eq(t, "entries below the removal point after reopening", entriesOf(t, l, 1, 300, 302, 1<<20), []string(nil))
}

// TestTornTail: a record the crash cut short, or whose bytes the device
// did not all keep, ends the log: everything before it reads back, and
// the log goes on from there.
func TestTornTail(t *testing.T) {
	for _, damage := range []string{"cut", "flip"} {
		t.Run(damage, func(t *testing.T) {
			dir := t.TempDir()
			l := openLog(t, dir, 0)
			save(t, l, pb.Update{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1, Commit: 3}, EntriesToSave: ents(1, 3, 1)})
			seg := segmentFiles(t, dir)[0]
			// Where the next record will start: the end of the data.
			l.writeMu.Lock()
			end := l.wOff
			l.writeMu.Unlock()
			save(t, l, pb.Update{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1, Commit: 5}, EntriesToSave: ents(4, 5, 1)})
			l.writeMu.Lock()
			recEnd := l.wOff
			l.writeMu.Unlock()
			l.Close()
			f, err := os.OpenFile(seg, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			switch damage {
			case "cut": // the record's last bytes never reached the disk
				zeros := make([]byte, 10)
				if _, err := f.WriteAt(zeros, recEnd-10); err != nil {
					t.Fatal(err)
				}
			case "flip":
				b := make([]byte, 1)
				f.ReadAt(b, end+headerSize+3)
				b[0] ^= 0x40
				if _, err := f.WriteAt(b, end+headerSize+3); err != nil {
					t.Fatal(err)
				}
			}
			f.Close()
			l = openLog(t, dir, 0)
			eq(t, "state", readState(t, l, 1, 0), raftio.RaftState{State: pb.State{Term: 1, Commit: 3}, FirstIndex: 1, EntryCount: 3})
			eq(t, "entries", entriesOf(t, l, 1, 1, 10, 1<<20), want(1, 3, 1))
			save(t, l, pb.Update{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 2, Commit: 3}, EntriesToSave: ents(4, 6, 2)})
			l.Close()
			l = openLog(t, dir, 0)
			defer l.Close()
			eq(t, "entries after going on", entriesOf(t, l, 1, 1, 10, 1<<20), append(want(1, 3, 1), want(4, 6, 2)...))
		})
	}
}

// TestCorruptPayload: a record whose checksum matches but which does not
// parse is not a torn write: Open refuses the log.
func TestCorruptPayload(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, 0)
	l.writeMu.Lock()
	l.b.reset(kindUpdates)
	l.b.uvarint(1)
	l.b.uvarint(1) // a shard, then nothing more
	err := l.writeRecord(l.b.seal())
	l.writeMu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if _, err := Open(dir, Options{}); !errors.Is(err, errCorrupt) {
		t.Fatalf("open: %v, want errCorrupt", err)
	}
}

// TestRemoveNodeAndImport: a removed replica is gone after a reopen; an
// imported snapshot is the replica's whole log.
func TestRemoveNodeAndImport(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, 0)
	for shard := uint64(1); shard <= 2; shard++ {
		if err := l.SaveBootstrapInfo(shard, 1, pb.Bootstrap{Type: pb.OnDiskStateMachine}); err != nil {
			t.Fatal(err)
		}
		save(t, l, pb.Update{ShardID: shard, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: ents(1, 5, 1)})
	}
	if err := l.RemoveNodeData(1, 1); err != nil {
		t.Fatal(err)
	}
	ss := pb.Snapshot{ShardID: 2, Index: 50, Term: 4, Type: pb.OnDiskStateMachine, Filepath: "/s"}
	if err := l.ImportSnapshot(ss, 1); err != nil {
		t.Fatal(err)
	}
	check := func(l *Log) {
		t.Helper()
		if _, err := l.ReadRaftState(1, 1, 0); !errors.Is(err, raftio.ErrNoSavedLog) {
			t.Fatalf("removed replica: %v", err)
		}
		ni, _ := l.ListNodeInfo()
		eq(t, "nodes", ni, []raftio.NodeInfo{{ShardID: 2, ReplicaID: 1}})
		eq(t, "imported", readState(t, l, 2, 50), raftio.RaftState{State: pb.State{Term: 4, Commit: 50}, FirstIndex: 50})
		bs, err := l.GetBootstrapInfo(2, 1)
		if err != nil || !bs.Join {
			t.Fatalf("imported bootstrap %+v %v", bs, err)
		}
	}
	checkAcrossReopen(t, l, dir, 0, check)
}

// TestConcurrentShards: dragonboat's step workers save different shards
// at once while others read; every write lands (run with -race).
func TestConcurrentShards(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, 16<<10)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for shard := uint64(1); shard <= 4; shard++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := uint64(1); i <= 200; i++ {
				if err := l.SaveRaftState([]pb.Update{{ShardID: shard, ReplicaID: 1, State: pb.State{Term: 1, Commit: i}, EntriesToSave: ents(i, i, 1)}}, shard); err != nil {
					errs <- err
					return
				}
				if i%50 == 0 {
					l.RemoveEntriesTo(shard, 1, i-20)
					l.CompactEntriesTo(shard, 1, i-20)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for range 200 {
				if _, _, err := l.IterateEntries(nil, 0, shard, 1, 190, 200, 1<<20); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	l.Close()
	l = openLog(t, dir, 16<<10)
	defer l.Close()
	for shard := uint64(1); shard <= 4; shard++ {
		eq(t, fmt.Sprint("shard ", shard), entriesOf(t, l, shard, 181, 201, 1<<20), want(181, 200, 1))
		eq(t, "state", readState(t, l, shard, 180).State, pb.State{Term: 1, Commit: 200})
	}
}

// TestSegmentWithoutCheckpoint: every segment this log writes opens with
// a checkpoint; one whose first whole record is anything else was not
// written by it, and Open refuses the log rather than replay it without
// the metadata before it.
func TestSegmentWithoutCheckpoint(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, dir, 0)
	save(t, l, pb.Update{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: ents(1, 2, 1)})
	l.Close()
	var b builder
	b.reset(kindRemoveNode)
	b.uvarint(1)
	b.uvarint(1)
	if err := os.WriteFile(filepath.Join(dir, segmentName(9)), b.seal(), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, errCorrupt) {
		t.Fatalf("open: %v, want errCorrupt", err)
	}
}

// TestWriteFailureSticks: after a write fails the segment's end is
// unknown (the record may be half on disk), so the log takes nothing more
// and says why, rather than append after a torn record.
func TestWriteFailureSticks(t *testing.T) {
	l := openLog(t, t.TempDir(), 0)
	defer l.Close()
	save(t, l, pb.Update{ShardID: 1, ReplicaID: 1, State: pb.State{Term: 1}, EntriesToSave: ents(1, 1, 1)})
	l.writeMu.Lock()
	l.w.Close() // the device goes away under the writer
	l.writeMu.Unlock()
	first := l.SaveRaftState([]pb.Update{{ShardID: 1, ReplicaID: 1, EntriesToSave: ents(2, 2, 1)}}, 1)
	if first == nil {
		t.Fatal("a write to a closed segment succeeded")
	}
	if err := l.SaveBootstrapInfo(1, 1, pb.Bootstrap{}); !errors.Is(err, first) {
		t.Fatalf("the next write: %v, want the first failure %v", err, first)
	}
	eq(t, "entries", entriesOf(t, l, 1, 1, 3, 1<<20), want(1, 1, 1))
}
