package control

import (
	"context"
	"time"

	"nacos-lockd/statemachine"
)

// monitorNodes runs on every node and acts on the leader only: connections
// are node-local, so when a node dies or leaves, nobody is left to propose
// cleanup for the connections it held. The leader does it once the node
// has been unreachable (or out of the membership) for NodeGrace, so its
// clients' locks do not wait for lease expiry alone.
//
// Connections no node of ours minted (node "", connid.NodeOf: Nacos's ids
// in an imported snapshot, or foreign ones) can have no live transport
// here, since clients never send a connection id; the leader treats them
// as a node that is always down, so they are cleaned NodeGrace after it
// first sees them, as a dead node's are.
func (s *Loops) monitorNodes() {
	if s.cfg.PeerAlive == nil {
		return
	}
	down := map[string]time.Time{} // node -> first seen unreachable, this leadership term
	for s.sleep(s.cfg.NodeCheckInterval) {
		if !s.table.IsLeader() {
			clear(down)
			continue
		}
		nodes, err := s.table.Nodes()
		if err != nil {
			continue
		}
		now := s.now()
		for _, node := range nodes {
			if node == s.cfg.NodeID {
				continue
			}
			if node != "" && s.peerAlive(node) {
				delete(down, node)
				continue
			}
			since, seen := down[node]
			if !seen {
				down[node] = now
				if node == "" {
					s.log.Warn().Msg("locks held or awaited by connections of no node (imported from Nacos); they are released after the node grace")
				} else {
					s.log.Warn().Str("node", node).Msg("node unreachable; its clients' locks are released if it stays so")
				}
				continue
			}
			if now.Sub(since) < s.cfg.NodeGrace {
				continue
			}
			s.cleanupNode(node)
		}
	}
}

func (s *Loops) peerAlive(node string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.NodeCheckInterval)
	defer cancel()
	return s.cfg.PeerAlive(ctx, node)
}

func (s *Loops) cleanupNode(node string) {
	conns, err := s.table.Conns(node)
	if err != nil || len(conns) == 0 {
		return
	}
	s.log.Warn().Str("node", node).Int("connections", len(conns)).Dur("grace", s.cfg.NodeGrace).
		Msg("releasing locks of connections held by an unreachable node")
	for _, c := range conns {
		if s.stopping.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.RequestTimeout)
		_, err := s.table.Propose(ctx, statemachine.Command{
			Op: statemachine.OpCleanupConnection, NowMs: s.now().UnixMilli(), ConnID: c,
		})
		cancel()
		if err != nil {
			s.log.Debug().Err(err).Str("conn_id", c).Msg("node cleanup not committed; next check retries")
			return
		}
		s.cfg.Events.cleaned("node_down")
	}
}
