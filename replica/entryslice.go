package replica

import _ "unsafe" // go:linkname

// dragonboat keeps the Raft log's unapplied tail in memory, in a slice it
// replaces with a fresh one of InMemEntrySliceSize (512) entries, about
// 40 KiB allocated and zeroed, whenever the entries in it have all been
// applied and fewer than MinEntrySliceFreeSize (96) free slots are left:
// with one entry committed at a time, that is on every commit. It sized
// them for many small entries per commit; our group commit puts a
// moment's commands in one entry, so a node seldom has more than a few
// entries in flight. At W1 1500 pairs/s the allocation and its zeroing
// were 2.1% of the server's samples (perf), and the garbage collections
// it paced more on top. With 16 and 4 (ab, pinned, interleaved, 6-8
// rounds): W1 1500 pairs/s 0.89x server CPU per pair and 0.89x p50;
// 500 pairs/s 0.88x CPU; c=1 1.06x pairs/s at 0.88x CPU; c=64 1.10x at
// 0.89x; W2 c=16 1.06x hand-offs/s at 0.90x CPU. A commit that brings
// more entries than the slice holds grows it as append does.
//
// dragonboat reads these sizes from its internal soft settings, which can
// be changed only by a JSON file in the process's working directory at
// start-up; its raft package copies them into the two variables below
// when it is initialised, before this package, and reads them whenever it
// makes a slice. So this package sets them in its init, before any node
// exists. The link names are of the pinned dragonboat version: if they
// stopped naming its variables, these would be variables of our own and
// the sizes dragonboat's again, which TestEntrySliceSizesReachDragonboat
// catches by the sizes it found.

//go:linkname raftEntrySliceSize github.com/lni/dragonboat/v4/internal/raft.entrySliceSize
var raftEntrySliceSize uint64

//go:linkname raftMinEntrySliceSize github.com/lni/dragonboat/v4/internal/raft.minEntrySliceSize
var raftMinEntrySliceSize uint64

const (
	entrySliceSize    = 16
	minEntrySliceFree = 4 // dragonboat panics unless below entrySliceSize
)

// foundEntrySliceSizes are the sizes dragonboat had set, for the test.
var foundEntrySliceSizes [2]uint64

func init() {
	foundEntrySliceSizes = [2]uint64{raftEntrySliceSize, raftMinEntrySliceSize}
	raftEntrySliceSize = entrySliceSize
	raftMinEntrySliceSize = minEntrySliceFree
}
