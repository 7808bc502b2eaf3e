package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/gateway/admin"
	"nacos-lockd/gateway/admin/adminapi"
	"nacos-lockd/statemachine"
)

// The version gate (statemachine/DESIGN.md, Cluster level), after etcd's
// cluster version: every member advertises what its build reads at
// GET /v1/cluster/version; the leader polls the members of the current
// membership, takes the lowest level, and proposes a level entry when that
// is above the level the table has applied. Proposers pick their
// encodings from the applied level (replica.Node.ClusterLevel), so nothing
// a member cannot read is proposed while it is a member.

// gatePoll is how often the leader polls the members. The membership is
// read afresh each time, so a member added or removed counts from the
// next poll.
const gatePoll = time.Second

// settledPolls is how many ticks apart the leader polls once the cluster
// is at this build's level: there is nothing left to raise, and the poll
// (a new HTTP connection to every member) only refreshes the members'
// answers that GET /v1/cluster/version shows.
const settledPolls = 30

// gateNode is what the gate needs of the replica.
type gateNode interface {
	IsLeader() bool
	ReplicaID() uint64
	Membership(ctx context.Context) (map[uint64]string, error)
	ClusterLevel() int
	ProposeLevel(ctx context.Context, level int) error
}

type versionGate struct {
	node    gateNode
	peers   *peerDirectory
	log     zerolog.Logger
	build   [2]string // version, commit
	version func(ctx context.Context, m admin.Member) adminapi.MemberVersion

	mu      sync.Mutex
	last    []adminapi.MemberVersion // the latest poll, for GET /v1/cluster/version
	holding string                   // who held the level back at the latest poll, to log changes only
}

func newVersionGate(node gateNode, peers *peerDirectory, build [2]string, log zerolog.Logger) *versionGate {
	g := &versionGate{node: node, peers: peers, build: build, log: log.With().Str("component", "version-gate").Logger()}
	g.version = peers.memberVersion
	return g
}

// advertised is this node's answer at GET /v1/cluster/version.
func (g *versionGate) advertised() adminapi.Version {
	v := adminapi.Version{Build: g.build[0], Commit: g.build[1], Reads: readsJSON(statemachine.BuildVersions()), ClusterLevel: g.node.ClusterLevel()}
	if g.node.IsLeader() {
		g.mu.Lock()
		v.Members = slices.Clone(g.last)
		g.mu.Unlock()
	}
	return v
}

func readsJSON(v statemachine.Versions) adminapi.Versions {
	return adminapi.Versions{Level: v.Level, Command: v.Command, Frame: v.Frame, Record: v.Record, Snapshot: v.Snapshot}
}

// run polls while this node leads, until ctx ends.
func (g *versionGate) run(ctx context.Context) {
	t := time.NewTicker(gatePoll)
	defer t.Stop()
	for tick := 0; ; tick++ {
		if g.node.IsLeader() && g.pollDue(tick) {
			if err := g.check(ctx); err != nil && ctx.Err() == nil {
				g.log.Debug().Err(err).Msg("version gate poll")
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// pollDue reports whether the leader polls at this tick: every tick while
// the level can still rise, every settledPolls-th once it is this build's.
func (g *versionGate) pollDue(tick int) bool {
	return g.node.ClusterLevel() < statemachine.MaxLevel || tick%settledPolls == 0
}

// check polls every member once and raises the level if all of them read
// a higher one. A member that does not answer at all holds the level
// where it is: it may be a build that reads less, and the level cannot
// be lowered once raised.
func (g *versionGate) check(ctx context.Context) error {
	members, err := g.node.Membership(ctx)
	if err != nil {
		return err
	}
	polled := g.poll(ctx, members)
	lowest := statemachine.MaxLevel
	var holding []string
	for _, m := range polled {
		switch {
		case m.Level == 0:
			holding = append(holding, m.Address+" (no answer)")
			lowest = 0
		case m.Level < statemachine.MaxLevel:
			holding = append(holding, fmt.Sprintf("%s (level %d)", m.Address, m.Level))
			lowest = min(lowest, m.Level)
		}
	}
	g.mu.Lock()
	g.last = polled
	changed := strings.Join(holding, ", ") != g.holding
	g.holding = strings.Join(holding, ", ")
	g.mu.Unlock()
	current := g.node.ClusterLevel()
	if changed && len(holding) > 0 && current < statemachine.MaxLevel {
		g.log.Info().Int("cluster_level", current).Int("this_build", statemachine.MaxLevel).Strs("members", holding).
			Msg("cluster level held back: these members do not read this build's level (or did not answer)")
	}
	if lowest <= current {
		return nil
	}
	// A member added while the poll ran has not been asked: poll again
	// next time. (The window left, between this read and the entry's
	// commit, is etcd's too; a join is also refused once the level rose.)
	again, err := g.node.Membership(ctx)
	if err != nil {
		return err
	}
	if !maps.Equal(again, members) {
		return nil
	}
	g.log.Info().Int("from", current).Int("to", lowest).Int("members", len(polled)).Msg("every member reads a higher cluster level: proposing it")
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return g.node.ProposeLevel(pctx, lowest)
}

// poll asks every member for its advertisement, in parallel; this node
// answers for itself.
func (g *versionGate) poll(ctx context.Context, members map[uint64]string) []adminapi.MemberVersion {
	out := make([]adminapi.MemberVersion, 0, len(members))
	var mu sync.Mutex
	var wg sync.WaitGroup
	self := g.node.ReplicaID()
	for id, raft := range members {
		m := g.peers.describe(id, raft)
		if id == self {
			reads := readsJSON(statemachine.BuildVersions())
			mu.Lock()
			out = append(out, adminapi.MemberVersion{ReplicaID: id, Address: m.Address, Advertised: true, Level: reads.Level, Build: g.build[0], Reads: &reads})
			mu.Unlock()
			continue
		}
		wg.Go(func() {
			v := g.version(ctx, m)
			mu.Lock()
			out = append(out, v)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.SortFunc(out, func(a, b adminapi.MemberVersion) int { return strings.Compare(a.Address, b.Address) })
	return out
}

// memberVersion asks one member what it reads. A 404 is a build without
// the gate: the baseline. Anything else that is not an advertisement
// (unreachable, refused, garbled) is Level 0: unknown.
func (d *peerDirectory) memberVersion(ctx context.Context, m admin.Member) adminapi.MemberVersion {
	out := adminapi.MemberVersion{ReplicaID: m.ReplicaID, Address: m.Address}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.scheme+"://"+m.Address+"/v1/cluster/version", nil)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	if d.identity[0] != "" {
		req.Header.Set(d.identity[0], d.identity[1])
	}
	resp, err := d.client.Do(req)
	if err != nil {
		out.Error = err.Error()
		return out
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotFound:
		out.Level = statemachine.LevelBaseline
		out.Error = "does not advertise: a build older than the version gate, counted as the baseline"
		return out
	default:
		out.Error = fmt.Sprintf("GET /v1/cluster/version: %s", resp.Status)
		return out
	}
	var v adminapi.Version
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&v); err != nil || v.Reads.Level < statemachine.LevelBaseline {
		out.Error = fmt.Sprintf("GET /v1/cluster/version: not an advertisement (%v)", err)
		return out
	}
	out.Advertised, out.Level, out.Build, out.Reads = true, v.Reads.Level, v.Build, &v.Reads
	return out
}

// checkStoredLevel stops a start whose data dir is at a cluster level this
// build cannot read: it was run by a newer build, and levels never fall.
func checkStoredLevel(r statemachine.StoreReader) error {
	l, err := statemachine.StoredLevel(r)
	if err != nil {
		return fmt.Errorf("read the stored cluster level: %w", err)
	}
	if l > statemachine.MaxLevel {
		return fmt.Errorf("the data dir is at cluster level %d and this build reads up to level %d: it was last run by a newer build, and a cluster level never falls; run a build that reads level %d", l, statemachine.MaxLevel, l)
	}
	return nil
}
