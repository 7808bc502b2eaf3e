package replica

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/lni/dragonboat/v4/raftio"
	pb "github.com/lni/dragonboat/v4/raftpb"
	sm "github.com/lni/dragonboat/v4/statemachine"
	"github.com/rs/zerolog"

	"nacos-lockd/replica/raftlog"
)

// The sole-voter engine: a node that is its shard's only member orders,
// logs and applies its entries itself, without dragonboat. Under Raft a
// single node's entry still went through dragonboat's proposal queue, its
// step worker, its apply worker and its result notification, two passes
// of each per entry; that cost a single node 15-20% of its CPU at a
// moderate load (gateway/DESIGN.md, "What the Raft engine costs a single
// node"). Here the group commit's entries go to one goroutine, which
// writes whatever has queued in one synced record of the same log
// (replica/raftlog), applies it to the same state machine (diskSM) and
// answers. The entries keep Raft's numbering: an entry's index is what
// the table records as applied and what a grant's fencing token is, and
// it continues from the table's and the log's across restarts.
//
// Nothing else votes, so an entry is committed once its record is on
// disk, and every read of the local table is linearizable. A solo node
// has no members to add: it answers membership changes with
// ErrSoleVoterEngine.

// EngineRaft and EngineSolo are RaftConfig.Engine's values.
const (
	EngineRaft = "raft" // dragonboat: the default
	EngineSolo = "solo" // the sole-voter engine, for a single node
)

// soloDirName is the sole-voter engine's log directory in the node host
// directory. Its presence is what marks a data dir as the engine's.
const soloDirName = "solo-log"

// soloTerm is the term of the engine's entries: there is never an
// election.
const soloTerm = 1

// soloSegmentSize is the log's segment size (0: raftlog's default); tests
// make it small to see segments go.
var soloSegmentSize int64

// ErrSoleVoterEngine is the answer to a membership change on a node that
// runs the sole-voter engine.
var ErrSoleVoterEngine error = fixedMembershipError{}

type fixedMembershipError struct{}

func (fixedMembershipError) Error() string {
	return "this node runs the single-node engine, which has no Raft membership: to grow it into a cluster, export a snapshot and restore it onto the cluster's first node"
}

// FixedMembership tells the admin API that no retry will help (409, not
// 503).
func (fixedMembershipError) FixedMembership() bool { return true }

// soloEngine is the engine's writer and applier.
type soloEngine struct {
	log     *raftlog.Log
	sm      *diskSM
	shardID uint64
	replica uint64
	logger  zerolog.Logger
	// compactEvery is how many entries the log keeps beyond the table's
	// durable state before it drops them (RaftConfig.SnapshotEntries).
	compactEvery uint64

	mu      sync.Mutex
	queue   []*soloEntry
	closed  bool
	failure error // set once a write or an apply failed: nothing more is taken

	wake chan struct{} // one pending signal
	done chan struct{} // closed when run returns

	// Only run touches these (close, once run has returned).
	next       uint64      // the next entry's index
	compacting chan uint64 // a compaction under way delivers the index it compacted to
	compacted  uint64      // the table is durable up to here, and the log is dropped below it
}

// soloEntry is one entry waiting to be written and applied.
type soloEntry struct {
	cmd      []byte
	commands int
	grants   bool
	out      chan soloResult // buffered: run never blocks on it
}

type soloResult struct {
	data []byte
	err  error
}

// startSolo opens the engine's log in dir, replays into s every entry
// the table has not applied, and starts the writer.
func startSolo(dir string, s *diskSM, shardID, replicaID, compactEvery uint64, syncs *atomic.Uint64, logger zerolog.Logger) (*soloEngine, error) {
	applied, err := s.Open(nil)
	if err != nil {
		return nil, err
	}
	l, err := raftlog.Open(dir, raftlog.Options{Busy: logBusy, SegmentSize: soloSegmentSize, Syncs: syncs})
	if err != nil {
		return nil, fmt.Errorf("open single-node log: %w", err)
	}
	e := &soloEngine{
		log: l, sm: s, shardID: shardID, replica: replicaID, logger: logger,
		compactEvery: compactEvery,
		wake:         make(chan struct{}, 1),
		done:         make(chan struct{}),
	}
	last, err := e.replay(applied)
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	e.next = max(applied, last) + 1
	e.compacted = applied
	go e.run()
	return e, nil
}

// replay applies the logged entries after applied and returns the log's
// last index (0 for an empty log).
func (e *soloEngine) replay(applied uint64) (uint64, error) {
	rs, err := e.log.ReadRaftState(e.shardID, e.replica, 0)
	if errors.Is(err, raftio.ErrNoSavedLog) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read single-node log: %w", err)
	}
	if rs.EntryCount == 0 {
		if applied < rs.State.Commit {
			return 0, fmt.Errorf("single-node log holds no entries, but its commit index %d is past the lock table's %d", rs.State.Commit, applied)
		}
		return rs.State.Commit, nil
	}
	last := rs.FirstIndex + rs.EntryCount - 1
	if applied >= last {
		return last, nil
	}
	if applied+1 < rs.FirstIndex {
		return 0, fmt.Errorf("single-node log starts at entry %d but the lock table has applied only up to %d: entries %d to %d are missing", rs.FirstIndex, applied, applied+1, rs.FirstIndex-1)
	}
	ents, _, err := e.log.IterateEntries(nil, 0, e.shardID, e.replica, applied+1, last+1, math.MaxUint64)
	if err != nil {
		return 0, fmt.Errorf("read single-node log: %w", err)
	}
	if uint64(len(ents)) != last-applied {
		return 0, fmt.Errorf("single-node log: read %d entries after %d, want %d", len(ents), applied, last-applied)
	}
	batch := make([]sm.Entry, len(ents))
	for i, ent := range ents {
		batch[i] = sm.Entry{Index: ent.Index, Cmd: ent.Cmd}
	}
	if _, err := e.sm.Update(batch); err != nil {
		return 0, fmt.Errorf("replay single-node log: %w", err)
	}
	e.logger.Info().Int("entries", len(ents)).Uint64("from", applied+1).Uint64("to", last).Msg("single-node log replayed")
	return last, nil
}

// submit queues one entry; its result arrives on the returned channel.
func (e *soloEngine) submit(cmd []byte, commands int, grants bool) (<-chan soloResult, error) {
	out := make(chan soloResult, 1)
	e.mu.Lock()
	switch {
	case e.closed:
		e.mu.Unlock()
		return nil, errClosing
	case e.failure != nil:
		err := e.failure
		e.mu.Unlock()
		return nil, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	e.queue = append(e.queue, &soloEntry{cmd: cmd, commands: commands, grants: grants, out: out})
	select { // under mu: close closes wake under it
	case e.wake <- struct{}{}:
	default:
	}
	e.mu.Unlock()
	return out, nil
}

// run writes, applies and answers what queues, until close.
func (e *soloEngine) run() {
	defer close(e.done)
	var batch []*soloEntry
	var ents []pb.Entry
	var apply []sm.Entry
	for range e.wake { // close closes wake: the loop then drains and ends
		// The submit that woke run made it the next goroutine to run,
		// ahead of the request handlers the network had already made
		// runnable. Yielding once lets those queue their commands first,
		// so they share this record instead of each waiting a sync of its
		// own while the P is held. (Handing the P off for every sync that
		// followed closely on the previous one did that too, at the cost
		// of a thread switch for many spaced syncs at a fixed rate.)
		runtime.Gosched()
		for {
			e.mu.Lock()
			batch = append(batch[:0], e.queue...)
			clear(e.queue)
			e.queue = e.queue[:0]
			closed, failure := e.closed, e.failure
			e.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			switch {
			case failure != nil:
				answerAll(batch, fmt.Errorf("%w: %w", ErrUnavailable, failure))
			case closed:
				answerAll(batch, errClosing)
			default:
				ents, apply = e.commit(batch, ents[:0], apply[:0])
			}
		}
	}
}

func answerAll(batch []*soloEntry, err error) {
	for _, q := range batch {
		q.out <- soloResult{err: err}
	}
}

// commit writes batch as consecutive entries in one record, applies them
// and hands out their results.
func (e *soloEngine) commit(batch []*soloEntry, ents []pb.Entry, apply []sm.Entry) ([]pb.Entry, []sm.Entry) {
	commands, grants := 0, false
	for _, q := range batch {
		ents = append(ents, pb.Entry{Term: soloTerm, Index: e.next + uint64(len(ents)), Cmd: q.cmd})
		commands += q.commands
		grants = grants || q.grants
	}
	last := ents[len(ents)-1].Index
	ud := pb.Update{
		ShardID: e.shardID, ReplicaID: e.replica,
		State:         pb.State{Term: soloTerm, Vote: e.replica, Commit: last},
		EntriesToSave: ents,
	}
	// The sync hands its P off for a large entry or a hand-off's, as
	// under Raft. A closed loop's backlog shows as a large entry because
	// run yields before it takes the queue (gateway/DESIGN.md, "The
	// single-node engine").
	hintSync(commands, grants)
	err := e.log.SaveRaftState([]pb.Update{ud}, 0)
	if err != nil {
		e.fail(batch, fmt.Errorf("write single-node log: %w", err))
		return ents, apply
	}
	e.next = last + 1
	for i := range ents {
		apply = append(apply, sm.Entry{Index: ents[i].Index, Cmd: ents[i].Cmd})
	}
	applied, err := e.sm.Update(apply)
	if err != nil {
		// The entries are logged: a restart replays them.
		e.fail(batch, fmt.Errorf("apply single-node entries: %w", err))
		return ents, apply
	}
	for i, q := range batch {
		q.out <- soloResult{data: applied[i].Result.Data}
	}
	if e.compacting != nil {
		select {
		case e.compacted = <-e.compacting:
			e.compacting = nil
		default:
		}
	}
	if e.compacting == nil && last-e.compacted >= e.compactEvery {
		e.compacting = make(chan uint64, 1)
		go e.compact(e.compacted, e.compacting)
	}
	return ents, apply
}

// fail answers batch with err, and every later entry too: after a failed
// write or apply the table and the log may disagree until a restart
// replays the log.
func (e *soloEngine) fail(batch []*soloEntry, err error) {
	e.logger.Error().Err(err).Msg("single-node engine stopped taking entries; restart the node")
	e.mu.Lock()
	if e.failure == nil {
		e.failure = err
	}
	e.mu.Unlock()
	answerAll(batch, fmt.Errorf("%w: %w", ErrUnavailable, err))
}

// compact makes the table durable and drops the log's entries it holds,
// then delivers the index it compacted to (from, if it could not).
func (e *soloEngine) compact(from uint64, done chan<- uint64) {
	compacted := from
	defer func() { done <- compacted }()
	e.sm.mu.RLock()
	index := e.sm.table.Applied()
	e.sm.mu.RUnlock()
	// Sync persists at least up to index: it flushes what is applied now.
	if err := e.sm.Sync(); err != nil {
		e.logger.Warn().Err(err).Msg("single-node log not compacted: persisting the lock table failed")
		return
	}
	if err := e.log.RemoveEntriesTo(e.shardID, e.replica, index); err != nil {
		e.logger.Warn().Err(err).Msg("single-node log not compacted")
		return
	}
	if _, err := e.log.CompactEntriesTo(e.shardID, e.replica, index); err != nil {
		e.logger.Warn().Err(err).Msg("single-node log not compacted")
		return
	}
	compacted = index
}

// close stops taking entries, answers the queued ones with errClosing,
// waits for the writer and closes the log.
func (e *soloEngine) close() {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		<-e.done
		return
	}
	e.closed = true
	close(e.wake)
	e.mu.Unlock()
	<-e.done
	if e.compacting != nil {
		<-e.compacting
	}
	if err := e.log.Close(); err != nil {
		e.logger.Warn().Err(err).Msg("close single-node log")
	}
}

// soloDir is the engine's log directory in a node host directory.
func soloDir(nodeHostDir string) string { return filepath.Join(nodeHostDir, soloDirName) }

// ChooseEngine picks the engine a node starts on: the one its data dir
// was made with, else, for a new data dir, want for a single node (a
// shard of this one member, neither joining nor listed with others) and
// Raft for a cluster's member. A cluster member on a data dir the
// sole-voter engine made is an error: that node has no Raft state to
// join with.
func ChooseEngine(nodeHostDir, want string, single bool) (string, error) {
	switch want {
	case "", EngineRaft, EngineSolo:
	default:
		return "", fmt.Errorf("raft: unknown engine %q (want %q or %q)", want, EngineRaft, EngineSolo)
	}
	made, err := madeBy(nodeHostDir)
	switch {
	case err != nil:
		return "", err
	case made == EngineSolo && !single:
		return "", fmt.Errorf("data dir %s was made by the single-node engine, which has no Raft state: a cluster member needs an empty data dir, or one made by the Raft engine", nodeHostDir)
	case made != "":
		return made, nil
	case !single || want == "":
		return EngineRaft, nil
	}
	return want, nil
}

// madeBy reports which engine made a node host directory: EngineSolo when
// the engine's log directory is there, EngineRaft when dragonboat has used
// it (its replica started there: our marker; or dragonboat opened it: its
// flag file, or our choice of its log, written before it opens), "" for a
// new one. The engine's log directory wins: its start writes the same
// replica marker.
func madeBy(nodeHostDir string) (string, error) {
	names := []struct{ name, engine string }{
		{soloDirName, EngineSolo},
		{bootstrappedMarker, EngineRaft},
		{dragonboatFlagFile, EngineRaft},
		{raftLogMarker, EngineRaft},
	}
	for _, n := range names {
		_, err := os.Stat(filepath.Join(nodeHostDir, n.name))
		if err == nil {
			return n.engine, nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("inspect data dir: %w", err)
		}
	}
	return "", nil
}
