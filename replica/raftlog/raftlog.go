// Package raftlog is the Raft log nacos-lockd gives dragonboat in place of
// dragonboat's pebble log (raftio.ILogDB): one synced direct write per
// SaveRaftState and nothing else.
//
// A single node syncs its log once per Raft entry, and every lock command
// waits for that sync, so the log's cost is on every command's path.
// Under dragonboat's pebble log each entry also went through pebble's
// batch, memtable and commit pipeline and its flush goroutine, ~35 µs of
// CPU per entry on our test machines, about a tenth of the server's CPU
// per W1 pair at 1500 pairs/s (gateway/DESIGN.md has the measurements).
// A lock server's log needs none of what pebble offers: its entries are
// written once, in order, read back only when a follower lags or the
// node restarts, and dropped in order after a snapshot.
//
// The log is a sequence of segment files (NNNNNNNNNNNNNNNN.log in the
// log's directory), each written from its start by one writer, padded
// ahead and written with direct synchronous I/O by replica/walfile. Each
// call that changes the log appends one record and returns once the
// device holds it. Every segment opens with a checkpoint record holding
// every node's metadata (bootstrap, Raft state, latest snapshot, last
// index), so the segments before the oldest one whose entries are still
// needed can be deleted: a suffix of the segments always replays to the
// whole log. Memory holds the metadata and, per entry, where its bytes
// are; entries are read from their segment when asked for.
//
// Replay reads each segment up to its first record that is cut short or
// whose checksum does not match: a write torn by a crash, which had not
// returned, so nothing acknowledged is lost. A log that reopens starts a
// new segment rather than appending after a torn tail.
//
// The semantics follow dragonboat's own pebble log where the interface
// leaves a choice: the last index is the last entry saved (or the
// snapshot's, when a snapshot is saved with the state), entries past it
// do not exist, RemoveEntriesTo keeps the entry at its index, and only
// the latest snapshot's metadata is kept.
package raftlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/vfs"
	"github.com/lni/dragonboat/v4/config"
	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"

	"nacos-lockd/internal/durable"
	"nacos-lockd/replica/walfile"
)

// Name is the log's type name, which dragonboat records in its data
// directory's flag file and checks on every start.
const Name = "nacos-lockd-raftlog"

// DirName is the log's directory under dragonboat's WAL directory.
const DirName = "raftlog"

// DefaultSegmentSize is the size past which the writer starts a new
// segment.
const DefaultSegmentSize = 64 << 20

// Options configures a Log. The zero value is usable.
type Options struct {
	// Busy is the segments' walfile Busy: whether a sync hands its P
	// off to other goroutines.
	Busy func() bool
	// SegmentSize: 0 picks DefaultSegmentSize.
	SegmentSize int64
	// Syncs, when set, counts the records written, one synced write
	// each: the log's syncs, which a benchmark divides by its
	// operations (a record may hold many entries).
	Syncs *atomic.Uint64
}

// Factory makes the Log for dragonboat (config.LogDBFactory).
type Factory struct{ Options Options }

// Name is the log's type name.
func (Factory) Name() string { return Name }

// Create opens the log in the WAL directory dragonboat gives it.
func (f Factory) Create(_ config.NodeHostConfig, _ config.LogDBCallback, dirs, walDirs []string) (raftio.ILogDB, error) {
	dir := ""
	switch {
	case len(walDirs) > 0 && walDirs[0] != "":
		dir = walDirs[0]
	case len(dirs) > 0:
		dir = dirs[0]
	default:
		return nil, errors.New("raftlog: no directory given")
	}
	return Open(filepath.Join(dir, DirName), f.Options)
}

type nodeKey struct{ shard, replica uint64 }

// entryLoc is where an entry's encoding is: its segment, offset and length.
type entryLoc struct {
	off  int64
	seq  uint32
	size uint32
}

// nodeLog is one replica's log in memory.
type nodeLog struct {
	bootstrap    pb.Bootstrap
	hasBootstrap bool
	state        pb.State
	hasState     bool
	snapshot     pb.Snapshot // the latest; empty if none
	maxIndex     uint64      // the last index, when hasMax
	hasMax       bool
	first        uint64     // the index of ents[0]
	ents         []entryLoc // entries first, first+1, ...; never past maxIndex
}

func (n *nodeLog) end() uint64 { return n.first + uint64(len(n.ents)) } // one past the last entry

// appendEntries records entries first, first+1, ... at locs: they replace
// the entries from first on. A run that does not join the entries held
// (after a snapshot from the leader, the older entries are behind the
// snapshot) replaces them all.
func (n *nodeLog) appendEntries(first uint64, locs []entryLoc) {
	if len(locs) == 0 {
		return
	}
	if len(n.ents) == 0 || first < n.first || first > n.end() {
		n.first = first
		n.ents = n.ents[:0]
	} else {
		n.ents = n.ents[:first-n.first]
	}
	n.ents = append(n.ents, locs...)
	n.maxIndex, n.hasMax = first+uint64(len(locs))-1, true
}

// setMaxIndex makes index the last index; entries past it are gone.
func (n *nodeLog) setMaxIndex(index uint64) {
	n.maxIndex, n.hasMax = index, true
	switch {
	case index < n.first:
		n.ents = n.ents[:0]
	case index < n.end():
		n.ents = n.ents[:index-n.first+1]
	}
}

// removeTo drops the entries below index.
func (n *nodeLog) removeTo(index uint64) {
	if index <= n.first || len(n.ents) == 0 {
		return
	}
	if index >= n.end() {
		n.first, n.ents = index, n.ents[:0]
		return
	}
	// A copy, so that the array behind does not grow without bound (this
	// runs once per snapshot).
	n.ents = slices.Clone(n.ents[index-n.first:])
	n.first = index
}

// Log is the Raft log of every replica of one NodeHost.
type Log struct {
	dir     string
	busy    func() bool // Options.Busy
	segSize int64
	syncs   *atomic.Uint64 // Options.Syncs, or nil

	// writeMu orders the appends: one record is encoded, written and
	// synced at a time. The writer's fields are the appender's.
	writeMu sync.Mutex
	w       vfs.File
	wSeq    uint32
	wOff    int64
	b       builder
	failed  error // a write that failed: the log takes no more

	// mu guards what readers see; appenders change it only after their
	// record is durable, holding writeMu as well.
	mu     sync.RWMutex
	nodes  map[nodeKey]*nodeLog
	segs   map[uint32]*os.File // open for reading, by sequence
	closed bool
}

var _ raftio.ILogDB = (*Log)(nil)

// Open opens the log in dir, creating it if needed, replays it and starts
// a new segment.
func Open(dir string, opts Options) (*Log, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("raftlog: create %s: %w", dir, err)
	}
	l := &Log{
		dir:     dir,
		busy:    opts.Busy,
		segSize: opts.SegmentSize,
		syncs:   opts.Syncs,
		nodes:   make(map[nodeKey]*nodeLog),
		segs:    make(map[uint32]*os.File),
	}
	if l.segSize <= 0 {
		l.segSize = DefaultSegmentSize
	}
	seqs, err := l.listSegments()
	if err != nil {
		return nil, err
	}
	for _, seq := range seqs {
		if err := l.replaySegment(seq); err != nil {
			l.closeReaders()
			return nil, err
		}
	}
	next := uint32(1)
	if len(seqs) > 0 {
		next = seqs[len(seqs)-1] + 1
	}
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	if err := l.startSegment(next); err != nil {
		l.closeReaders()
		return nil, err
	}
	if err := l.writeRecord(nil); err != nil {
		l.w.Close()
		l.closeReaders()
		return nil, err
	}
	l.mu.Lock()
	l.collect()
	l.mu.Unlock()
	return l, nil
}

func segmentName(seq uint32) string { return fmt.Sprintf("%016x.log", seq) }

// listSegments returns the segments' sequence numbers in order.
func (l *Log) listSegments() ([]uint32, error) {
	des, err := os.ReadDir(l.dir)
	if err != nil {
		return nil, fmt.Errorf("raftlog: list %s: %w", l.dir, err)
	}
	var seqs []uint32
	for _, de := range des {
		name, ok := strings.CutSuffix(de.Name(), ".log")
		if !ok || len(name) != 16 {
			continue
		}
		seq, err := strconv.ParseUint(name, 16, 32)
		if err != nil || seq == 0 {
			continue
		}
		seqs = append(seqs, uint32(seq))
	}
	slices.Sort(seqs)
	return seqs, nil
}

// startSegment creates segment seq and makes it the writer's, with a
// checkpoint waiting in the builder for the first write. writeMu is held.
func (l *Log) startSegment(seq uint32) error {
	path := filepath.Join(l.dir, segmentName(seq))
	w, err := walfile.Create(path, l.busy)
	if err != nil {
		return fmt.Errorf("raftlog: create segment: %w", err)
	}
	r, err := os.Open(path)
	if err != nil {
		w.Close()
		return fmt.Errorf("raftlog: open segment: %w", err)
	}
	if err := durable.SyncDir(l.dir); err != nil {
		w.Close()
		r.Close()
		return err
	}
	if l.w != nil {
		if err := l.w.Close(); err != nil {
			w.Close()
			r.Close()
			return fmt.Errorf("raftlog: close segment %d: %w", l.wSeq, err)
		}
	}
	l.mu.Lock()
	l.segs[seq] = r
	l.mu.Unlock()
	l.w, l.wSeq, l.wOff = w, seq, 0
	return nil
}

// checkpoint encodes every node's metadata, in a fixed order.
func (l *Log) checkpoint(b *builder) error {
	b.reset(kindCheckpoint)
	keys := l.sortedKeys()
	b.uvarint(uint64(len(keys)))
	for _, k := range keys {
		n := l.nodes[k]
		b.uvarint(k.shard)
		b.uvarint(k.replica)
		var flags byte
		if n.hasBootstrap {
			flags |= ckBootstrap
		}
		if n.hasState {
			flags |= ckState
		}
		if n.hasMax {
			flags |= ckMax
		}
		b.buf = append(b.buf, flags)
		if n.hasBootstrap {
			if err := b.marshaled(&n.bootstrap); err != nil {
				return err
			}
		}
		if n.hasState {
			if err := b.marshaled(&n.state); err != nil {
				return err
			}
		}
		if err := b.marshaled(&n.snapshot); err != nil {
			return err
		}
		b.uvarint(n.maxIndex)
		b.uvarint(n.first)
	}
	return nil
}

func (l *Log) sortedKeys() []nodeKey {
	keys := make([]nodeKey, 0, len(l.nodes))
	for k := range l.nodes {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].shard != keys[j].shard {
			return keys[i].shard < keys[j].shard
		}
		return keys[i].replica < keys[j].replica
	})
	return keys
}

// writeRecord appends rec (built in l.b and sealed, or nil for none) to
// the current segment, after the segment's checkpoint when it is the
// segment's first write, and syncs. writeMu is held.
func (l *Log) writeRecord(rec []byte) error {
	_, err := l.write(rec)
	return err
}

func (l *Log) write(rec []byte) (int64, error) {
	if l.failed != nil {
		return 0, l.failed
	}
	if l.wOff > 0 && l.wOff+int64(len(rec)) > l.segSize {
		if err := l.startSegment(l.wSeq + 1); err != nil {
			return 0, l.fail(err)
		}
	}
	if l.wOff == 0 {
		var ck builder
		l.mu.RLock()
		err := l.checkpoint(&ck)
		l.mu.RUnlock()
		if err != nil {
			return 0, err
		}
		c := ck.seal()
		if _, err := l.w.Write(c); err != nil {
			return 0, l.fail(fmt.Errorf("raftlog: write segment %d: %w", l.wSeq, err))
		}
		l.wOff += int64(len(c))
	}
	off := l.wOff
	if len(rec) > 0 {
		if _, err := l.w.Write(rec); err != nil {
			return 0, l.fail(fmt.Errorf("raftlog: write segment %d: %w", l.wSeq, err))
		}
	}
	if err := l.w.Sync(); err != nil {
		return 0, l.fail(fmt.Errorf("raftlog: sync segment %d: %w", l.wSeq, err))
	}
	if l.syncs != nil {
		l.syncs.Add(1)
	}
	l.wOff += int64(len(rec))
	return off, nil
}

// fail makes err the log's: what was written may be torn, so nothing more
// is appended after it.
func (l *Log) fail(err error) error {
	l.failed = err
	return err
}

// node returns k's log, creating it.
func (l *Log) node(k nodeKey) *nodeLog {
	n := l.nodes[k]
	if n == nil {
		n = &nodeLog{}
		l.nodes[k] = n
	}
	return n
}

// Name is the log's type name.
func (l *Log) Name() string { return Name }

// BinaryFormat is the format dragonboat records beside the name: entries
// stored one by one.
func (l *Log) BinaryFormat() uint32 { return raftio.PlainLogDBBinVersion }

// Close closes the log's files.
func (l *Log) Close() error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	var err error
	if l.w != nil {
		err = l.w.Close()
		l.w = nil
	}
	if l.failed == nil {
		l.failed = errors.New("raftlog: closed")
	}
	l.closeReaders()
	return err
}

func (l *Log) closeReaders() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for seq, f := range l.segs {
		f.Close()
		delete(l.segs, seq)
	}
}

// ListNodeInfo lists the replicas with bootstrap info.
func (l *Log) ListNodeInfo() ([]raftio.NodeInfo, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var out []raftio.NodeInfo
	for _, k := range l.sortedKeys() {
		if l.nodes[k].hasBootstrap {
			out = append(out, raftio.NodeInfo{ShardID: k.shard, ReplicaID: k.replica})
		}
	}
	return out, nil
}

// SaveBootstrapInfo saves a replica's bootstrap info.
func (l *Log) SaveBootstrapInfo(shardID, replicaID uint64, bs pb.Bootstrap) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.b.reset(kindBootstrap)
	l.b.uvarint(shardID)
	l.b.uvarint(replicaID)
	if err := l.b.marshaled(&bs); err != nil {
		return err
	}
	if err := l.writeRecord(l.b.seal()); err != nil {
		return err
	}
	l.mu.Lock()
	n := l.node(nodeKey{shardID, replicaID})
	n.bootstrap, n.hasBootstrap = bs, true
	l.mu.Unlock()
	return nil
}

// GetBootstrapInfo returns a replica's bootstrap info, or
// raftio.ErrNoBootstrapInfo.
func (l *Log) GetBootstrapInfo(shardID, replicaID uint64) (pb.Bootstrap, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := l.nodes[nodeKey{shardID, replicaID}]
	if n == nil || !n.hasBootstrap {
		return pb.Bootstrap{}, raftio.ErrNoBootstrapInfo
	}
	return n.bootstrap, nil
}

// SaveRaftState saves the updates' states, snapshots and entries in one
// record, durably, and returns once the device has it.
func (l *Log) SaveRaftState(updates []pb.Update, _ uint64) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	plan, changed, err := l.encodeUpdates(updates)
	if err != nil || !changed {
		return err // nothing changed: no write, as in dragonboat's own log
	}
	off, err := l.write(l.b.seal())
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, p := range plan {
		ud := &updates[i]
		if !p.state && !p.snapshot && len(p.locs) == 0 {
			continue
		}
		n := l.node(p.k)
		if p.state {
			n.state, n.hasState = ud.State, true
		}
		if p.snapshot {
			n.snapshot = ud.Snapshot
			n.setMaxIndex(ud.Snapshot.Index)
		}
		if len(p.locs) > 0 {
			for j := range p.locs {
				p.locs[j].off += off
				p.locs[j].seq = l.wSeq
			}
			n.appendEntries(ud.EntriesToSave[0].Index, p.locs)
		}
	}
	return nil
}

// plannedUpdate is what one update of a SaveRaftState changes.
type plannedUpdate struct {
	k        nodeKey
	state    bool       // a state that differs from the one held
	snapshot bool       // a snapshot newer than the one held
	locs     []entryLoc // the entries, their offsets within the record
}

// encodeUpdates encodes the updates' changes into l.b and says what each
// changes, and whether any does. writeMu is held.
func (l *Log) encodeUpdates(updates []pb.Update) ([]plannedUpdate, bool, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	plan := make([]plannedUpdate, len(updates))
	l.b.reset(kindUpdates)
	l.b.uvarint(uint64(len(updates)))
	changed := false
	for i := range updates {
		ud := &updates[i]
		k := nodeKey{ud.ShardID, ud.ReplicaID}
		n := l.nodes[k]
		p := &plan[i]
		p.k = k
		p.state = !pb.IsEmptyState(ud.State) && (n == nil || !n.hasState || n.state != ud.State)
		p.snapshot = !pb.IsEmptySnapshot(ud.Snapshot) && (n == nil || ud.Snapshot.Index > n.snapshot.Index)
		if last := len(ud.EntriesToSave) - 1; p.snapshot && last >= 0 && ud.Snapshot.Index > ud.EntriesToSave[last].Index {
			return nil, false, fmt.Errorf("raftlog: %d/%d: snapshot %d is past the entries saved with it (last %d)",
				ud.ShardID, ud.ReplicaID, ud.Snapshot.Index, ud.EntriesToSave[last].Index)
		}
		l.b.uvarint(ud.ShardID)
		l.b.uvarint(ud.ReplicaID)
		var flags byte
		if p.state {
			flags |= updState
		}
		if p.snapshot {
			flags |= updSnapshot
		}
		l.b.buf = append(l.b.buf, flags)
		if p.state {
			if err := l.b.marshaled(&ud.State); err != nil {
				return nil, false, err
			}
		}
		if p.snapshot {
			if err := l.b.marshaled(&ud.Snapshot); err != nil {
				return nil, false, err
			}
		}
		l.b.uvarint(uint64(len(ud.EntriesToSave)))
		if len(ud.EntriesToSave) > 0 {
			p.locs = make([]entryLoc, len(ud.EntriesToSave))
		}
		for j := range ud.EntriesToSave {
			e := &ud.EntriesToSave[j]
			if j > 0 && e.Index != ud.EntriesToSave[j-1].Index+1 {
				return nil, false, fmt.Errorf("raftlog: %d/%d: entries to save are not consecutive (%d after %d)",
					ud.ShardID, ud.ReplicaID, e.Index, ud.EntriesToSave[j-1].Index)
			}
			start, size, err := l.b.entry(e)
			if err != nil {
				return nil, false, err
			}
			p.locs[j] = entryLoc{off: int64(start), size: uint32(size)}
		}
		changed = changed || p.state || p.snapshot || len(p.locs) > 0
	}
	return plan, changed, nil
}

// ReadRaftState returns a replica's Raft state and the range of entries
// from snapshotIndex on, or raftio.ErrNoSavedLog.
func (l *Log) ReadRaftState(shardID, replicaID, snapshotIndex uint64) (raftio.RaftState, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := l.nodes[nodeKey{shardID, replicaID}]
	if n == nil || !n.hasState {
		return raftio.RaftState{}, raftio.ErrNoSavedLog
	}
	rs := raftio.RaftState{State: n.state, FirstIndex: snapshotIndex}
	if !n.hasMax || snapshotIndex == n.maxIndex {
		return rs, nil
	}
	first := max(snapshotIndex, n.first)
	if len(n.ents) == 0 || first >= n.end() || first > n.maxIndex {
		return raftio.RaftState{}, fmt.Errorf("raftlog: %d/%d: no entry from %d to the last index %d",
			shardID, replicaID, snapshotIndex, n.maxIndex)
	}
	rs.FirstIndex = first
	rs.EntryCount = n.maxIndex - first + 1
	return rs, nil
}

// IterateEntries appends to ents the entries from low up to high (not
// included), stopping after the one that takes size past maxSize, or at
// the first entry it does not hold.
func (l *Log) IterateEntries(ents []pb.Entry, size, shardID, replicaID, low, high, maxSize uint64) ([]pb.Entry, uint64, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	n := l.nodes[nodeKey{shardID, replicaID}]
	if n == nil || !n.hasMax {
		return ents, size, nil
	}
	high = min(high, n.maxIndex+1, n.end())
	if low < n.first {
		return ents, size, nil
	}
	var buf []byte
	for i := low; i < high; {
		// Read the entries in one segment in one go.
		j := i
		first := n.ents[i-n.first]
		last := first
		for j+1 < high && n.ents[j+1-n.first].seq == first.seq && n.ents[j+1-n.first].off > last.off {
			next := n.ents[j+1-n.first]
			if next.off+int64(next.size)-first.off > 1<<20 {
				break
			}
			j++
			last = next
		}
		span := int(last.off + int64(last.size) - first.off)
		buf = slices.Grow(buf[:0], span)[:span]
		f := l.segs[first.seq]
		if f == nil {
			return nil, 0, fmt.Errorf("raftlog: %d/%d: entry %d is in segment %d, which is gone", shardID, replicaID, i, first.seq)
		}
		if _, err := f.ReadAt(buf, first.off); err != nil {
			return nil, 0, fmt.Errorf("raftlog: %d/%d: read entry %d: %w", shardID, replicaID, i, err)
		}
		for ; i <= j; i++ {
			loc := n.ents[i-n.first]
			at := int(loc.off - first.off)
			var e pb.Entry
			if err := e.Unmarshal(buf[at : at+int(loc.size)]); err != nil {
				return nil, 0, fmt.Errorf("raftlog: %d/%d: decode entry %d: %w", shardID, replicaID, i, err)
			}
			if e.Index != i {
				return nil, 0, fmt.Errorf("raftlog: %d/%d: entry %d read back as %d", shardID, replicaID, i, e.Index)
			}
			// Unmarshal copies the entry's Cmd out of buf, which is reused.
			ents = append(ents, e)
			size += uint64(e.SizeUpperLimit())
			if size > maxSize {
				return ents, size, nil
			}
		}
	}
	return ents, size, nil
}

// RemoveEntriesTo drops the entries below index (the entry at index stays,
// as in dragonboat's own log). It is not written down: entries that come
// back after a crash are behind the snapshot and never asked for.
func (l *Log) RemoveEntriesTo(shardID, replicaID, index uint64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := l.nodes[nodeKey{shardID, replicaID}]; n != nil {
		n.removeTo(index)
	}
	return nil
}

// CompactEntriesTo deletes the segments no entry is needed from.
func (l *Log) CompactEntriesTo(_, _, _ uint64) (<-chan struct{}, error) {
	l.writeMu.Lock()
	l.mu.Lock()
	l.collect()
	l.mu.Unlock()
	l.writeMu.Unlock()
	done := make(chan struct{})
	close(done)
	return done, nil
}

// collect deletes the segments before the oldest one that holds an entry
// a replica keeps, and before the writer's. writeMu and mu are held.
func (l *Log) collect() {
	oldest := l.wSeq
	for _, n := range l.nodes {
		if len(n.ents) > 0 {
			oldest = min(oldest, n.ents[0].seq)
		}
	}
	for seq, f := range l.segs {
		if seq < oldest {
			f.Close()
			delete(l.segs, seq)
			// A segment that outlives a crash is replayed again: only
			// entries that were dropped come back, behind a later
			// checkpoint. So a failed remove is harmless.
			_ = os.Remove(filepath.Join(l.dir, segmentName(seq)))
		}
	}
}

// SaveSnapshots saves the snapshots' metadata, where newer than the one
// held.
func (l *Log) SaveSnapshots(updates []pb.Update) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.b.reset(kindSnapshots)
	var save []int
	l.mu.RLock()
	for i := range updates {
		ud := &updates[i]
		if pb.IsEmptySnapshot(ud.Snapshot) {
			continue
		}
		if n := l.nodes[nodeKey{ud.ShardID, ud.ReplicaID}]; n != nil && ud.Snapshot.Index <= n.snapshot.Index {
			continue
		}
		save = append(save, i)
	}
	l.mu.RUnlock()
	if len(save) == 0 {
		return nil
	}
	l.b.uvarint(uint64(len(save)))
	for _, i := range save {
		ud := &updates[i]
		l.b.uvarint(ud.ShardID)
		l.b.uvarint(ud.ReplicaID)
		if err := l.b.marshaled(&ud.Snapshot); err != nil {
			return err
		}
	}
	if err := l.writeRecord(l.b.seal()); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, i := range save {
		ud := &updates[i]
		n := l.node(nodeKey{ud.ShardID, ud.ReplicaID})
		if ud.Snapshot.Index > n.snapshot.Index {
			n.snapshot = ud.Snapshot
		}
	}
	return nil
}

// GetSnapshot returns the latest snapshot's metadata, empty if none.
func (l *Log) GetSnapshot(shardID, replicaID uint64) (pb.Snapshot, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if n := l.nodes[nodeKey{shardID, replicaID}]; n != nil {
		return n.snapshot, nil
	}
	return pb.Snapshot{}, nil
}

// RemoveNodeData forgets a replica: its bootstrap info, state, snapshot
// and entries.
func (l *Log) RemoveNodeData(shardID, replicaID uint64) error {
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.b.reset(kindRemoveNode)
	l.b.uvarint(shardID)
	l.b.uvarint(replicaID)
	if err := l.writeRecord(l.b.seal()); err != nil {
		return err
	}
	l.mu.Lock()
	delete(l.nodes, nodeKey{shardID, replicaID})
	l.collect()
	l.mu.Unlock()
	return nil
}

// ImportSnapshot makes ss the replica's whole log, as dragonboat's tools
// do to rebuild a replica from a snapshot: it joins at ss with ss's term.
func (l *Log) ImportSnapshot(ss pb.Snapshot, replicaID uint64) error {
	if ss.Type == pb.UnknownStateMachine {
		return errors.New("raftlog: import of a snapshot of an unknown state machine type")
	}
	l.writeMu.Lock()
	defer l.writeMu.Unlock()
	l.b.reset(kindImport)
	l.b.uvarint(replicaID)
	if err := l.b.marshaled(&ss); err != nil {
		return err
	}
	if err := l.writeRecord(l.b.seal()); err != nil {
		return err
	}
	l.mu.Lock()
	l.importSnapshot(ss, replicaID)
	l.mu.Unlock()
	return nil
}

func (l *Log) importSnapshot(ss pb.Snapshot, replicaID uint64) {
	n := &nodeLog{
		bootstrap:    pb.Bootstrap{Join: true, Type: ss.Type},
		hasBootstrap: true,
		state:        pb.State{Term: ss.Term, Commit: ss.Index},
		hasState:     true,
		snapshot:     ss,
	}
	n.setMaxIndex(ss.Index)
	l.nodes[nodeKey{ss.ShardID, replicaID}] = n
}
