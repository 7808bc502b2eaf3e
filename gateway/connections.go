package gateway

import (
	"cmp"
	"slices"

	"nacos-lockd/gateway/admin"
)

// Connections lists this node's registered client connections, oldest
// first, for the admin API (GET /v1/connections). The registry is
// node-local: each node lists only the clients connected to it.
func (s *Server) Connections() []admin.Connection {
	conns := s.reg.all()
	out := make([]admin.Connection, 0, len(conns))
	for _, c := range conns {
		c.mu.Lock()
		live := c.registered && !c.ended
		info := admin.Connection{ID: c.id, Remote: c.remote, ClientIP: c.clientIP, ClientVersion: c.version, AppName: c.app, Since: c.since}
		c.mu.Unlock()
		if live {
			out = append(out, info)
		}
	}
	slices.SortFunc(out, func(a, b admin.Connection) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}
