package raftlog

import (
	"fmt"
	"os"
	"path/filepath"

	pb "github.com/lni/dragonboat/v4/raftpb"
)

// replaySegment applies segment seq's records to memory, up to its first
// record that is torn (see the package comment), and keeps the segment
// open for reading its entries.
func (l *Log) replaySegment(seq uint32) error {
	path := filepath.Join(l.dir, segmentName(seq))
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("raftlog: read segment: %w", err)
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("raftlog: open segment: %w", err)
	}
	l.segs[seq] = f
	for off, first := 0, true; ; first = false {
		p, next, ok := nextRecord(data, off)
		if !ok {
			return nil
		}
		if first && p[0] != kindCheckpoint {
			return fmt.Errorf("raftlog: segment %s does not open with a checkpoint: %w", path, errCorrupt)
		}
		if err := l.replayRecord(p, seq, int64(off+headerSize)); err != nil {
			return fmt.Errorf("raftlog: segment %s, record at %d: %w", path, off, err)
		}
		off = next
	}
}

// replayRecord applies one record's payload p, which starts at offset base
// of segment seq.
func (l *Log) replayRecord(p []byte, seq uint32, base int64) error {
	r := &reader{p: p, pos: 1}
	switch p[0] {
	case kindCheckpoint:
		return l.replayCheckpoint(r)
	case kindUpdates:
		return l.replayUpdates(r, seq, base)
	case kindBootstrap:
		k := nodeKey{r.uvarint(), r.uvarint()}
		var bs pb.Bootstrap
		r.unmarshal(&bs)
		if err := r.done(); err != nil {
			return err
		}
		n := l.node(k)
		n.bootstrap, n.hasBootstrap = bs, true
	case kindSnapshots:
		count := r.uvarint()
		for i := uint64(0); i < count && r.err == nil; i++ {
			k := nodeKey{r.uvarint(), r.uvarint()}
			var ss pb.Snapshot
			r.unmarshal(&ss)
			if r.err == nil {
				if n := l.node(k); ss.Index > n.snapshot.Index {
					n.snapshot = ss
				}
			}
		}
		return r.done()
	case kindRemoveNode:
		k := nodeKey{r.uvarint(), r.uvarint()}
		if err := r.done(); err != nil {
			return err
		}
		delete(l.nodes, k)
	case kindImport:
		replicaID := r.uvarint()
		var ss pb.Snapshot
		r.unmarshal(&ss)
		if err := r.done(); err != nil {
			return err
		}
		l.importSnapshot(ss, replicaID)
	default:
		return fmt.Errorf("%w: unknown kind %d", errCorrupt, p[0])
	}
	return nil
}

// replayCheckpoint makes the checkpoint's metadata every node's; entries
// already replayed stay, within the checkpoint's range.
func (l *Log) replayCheckpoint(r *reader) error {
	count := r.uvarint()
	seen := make(map[nodeKey]bool, count)
	for i := uint64(0); i < count && r.err == nil; i++ {
		k := nodeKey{r.uvarint(), r.uvarint()}
		flags := r.byte()
		n := l.node(k)
		seen[k] = true
		n.hasBootstrap = flags&ckBootstrap != 0
		n.bootstrap = pb.Bootstrap{}
		if n.hasBootstrap {
			r.unmarshal(&n.bootstrap)
		}
		n.hasState = flags&ckState != 0
		n.state = pb.State{}
		if n.hasState {
			r.unmarshal(&n.state)
		}
		n.snapshot = pb.Snapshot{}
		r.unmarshal(&n.snapshot)
		maxIndex, first := r.uvarint(), r.uvarint()
		if flags&ckMax != 0 {
			n.setMaxIndex(maxIndex)
		} else {
			n.maxIndex, n.hasMax, n.ents = 0, false, n.ents[:0]
		}
		n.removeTo(first)
	}
	if err := r.done(); err != nil {
		return err
	}
	for k := range l.nodes {
		if !seen[k] {
			delete(l.nodes, k)
		}
	}
	return nil
}

func (l *Log) replayUpdates(r *reader, seq uint32, base int64) error {
	count := r.uvarint()
	for i := uint64(0); i < count && r.err == nil; i++ {
		k := nodeKey{r.uvarint(), r.uvarint()}
		flags := r.byte()
		var st pb.State
		var ss pb.Snapshot
		if flags&updState != 0 {
			r.unmarshal(&st)
		}
		if flags&updSnapshot != 0 {
			r.unmarshal(&ss)
		}
		nents := r.uvarint()
		if nents > uint64(len(r.p)) {
			return errCorrupt
		}
		var locs []entryLoc
		firstIndex := uint64(0)
		for j := uint64(0); j < nents && r.err == nil; j++ {
			index := r.uvarint()
			b, start := r.bytes()
			if j == 0 {
				firstIndex = index
			} else if index != firstIndex+j {
				return fmt.Errorf("%w: entry %d after %d", errCorrupt, index, firstIndex+j-1)
			}
			locs = append(locs, entryLoc{off: base + int64(start), seq: seq, size: uint32(len(b))})
		}
		if r.err != nil {
			break
		}
		if flags == 0 && len(locs) == 0 {
			continue
		}
		n := l.node(k)
		if flags&updState != 0 {
			n.state, n.hasState = st, true
		}
		if flags&updSnapshot != 0 {
			n.snapshot = ss
			n.setMaxIndex(ss.Index)
		}
		n.appendEntries(firstIndex, locs)
	}
	return r.done()
}
