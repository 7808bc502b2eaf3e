// Package admin is the HTTP API on the Nacos main port: health and
// readiness probes, cluster membership, the lock table (list, get, force
// release) and this node's connections. It is how operators and
// nacos-lockctl manage a node; lock clients never use it. It never
// imports statemachine: the lock routes read through the Locks interface,
// in statemachine/lockview's plain values.
package admin

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"nacos-lockd/gateway/admin/adminapi"
	"nacos-lockd/gateway/auth"
)

// Cluster is what the API needs from the Raft node.
type Cluster interface {
	ReplicaID() uint64
	LeaderID() (uint64, bool)
	Membership(ctx context.Context) (map[uint64]string, error)
	AddReplica(ctx context.Context, replicaID uint64, raftAddr string) error
	RemoveReplica(ctx context.Context, replicaID uint64) error
}

// Member describes a node as cluster.conf names it.
type Member struct {
	ReplicaID   uint64 `json:"replicaId"`
	Address     string `json:"address"` // ip:mainport, as in cluster.conf
	RaftAddress string `json:"raftAddress"`
}

// Config wires the API to the rest of the process.
type Config struct {
	// Resolve maps a cluster.conf address to the member it names (its
	// Address and RaftAddress; the id is decided on adding).
	Resolve func(address string) (Member, error)
	// NewReplicaID picks the id for a member being added: never one in
	// use, and never one removed before (dragonboat refuses those).
	NewReplicaID func(m Member, members map[uint64]string) uint64
	// Describe maps a Raft member back to its cluster.conf address.
	Describe func(replicaID uint64, raftAddr string) Member
	// Ready reports whether this node serves lock requests.
	Ready func() bool
	// Timeout bounds each Raft operation. Default 10s.
	Timeout time.Duration
	// Metrics serves GET /metrics; nil leaves the route out.
	Metrics http.Handler
	// Auth, when set, issues tokens on the Nacos login routes and guards
	// the /v1 admin routes (global admins only). Nil means auth is off:
	// login answers without a token and the admin routes are open.
	Auth *auth.Authenticator
	// TokenTTL is reported by login when auth is off.
	TokenTTL time.Duration
	// Identity is Nacos's server identity header (name, value): with auth
	// on, a request carrying it may change the membership, so that a new
	// node can --join without an admin token.
	Identity [2]string
	// Locks serves /v1/locks (list, get, force release); nil leaves those
	// routes out.
	Locks Locks
	// Connections serves GET /v1/connections; nil leaves it out.
	Connections Connections
	// Registerer is where the API registers its series (force releases);
	// nil records none.
	Registerer prometheus.Registerer
	// Version serves GET /v1/cluster/version (what this build reads, the
	// applied cluster level) and, when set, makes adding a member check
	// that the member reads the cluster's level. Nil leaves both out.
	Version func() adminapi.Version
	// Profiling serves Go's profiles and traces under /debug/pprof/,
	// guarded like the /v1 routes. Off leaves those routes out.
	Profiling bool
}

// BaselineLevel is the level of a member that does not say what it reads:
// a join request without "level" (a build without the version gate, or
// nacos-lockctl, which cannot vouch for the build), counted as the oldest
// build an upgrade may start from (statemachine.LevelBaseline).
const BaselineLevel = 1

// Server serves the admin API.
type Server struct {
	cfg     Config
	cluster Cluster
	log     zerolog.Logger
	mux     *http.ServeMux
	m       *metrics         // nil records nothing
	now     func() time.Time // wall clock for time-left figures
}

// New builds the API.
func New(cfg Config, cluster Cluster, log zerolog.Logger) *Server {
	if cfg.Timeout == 0 {
		cfg.Timeout = 10 * time.Second
	}
	s := &Server{cfg: cfg, cluster: cluster, log: log.With().Str("component", "admin").Logger(), mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "up"})
	})
	s.mux.HandleFunc("GET /readyz", s.readyz)
	// The Nacos client logs in here (docs/wire-protocol.md §7.1), v3 first.
	s.mux.HandleFunc("POST /nacos/v3/auth/user/login", s.login)
	s.mux.HandleFunc("POST /nacos/v1/auth/users/login", s.login)
	s.mux.HandleFunc("GET /v1/cluster/members", s.admin(s.listMembers))
	s.mux.HandleFunc("POST /v1/cluster/members", s.adminOrPeer(s.addMember))
	s.mux.HandleFunc("DELETE /v1/cluster/members/{address}", s.admin(s.removeMember))
	if cfg.Version != nil {
		// Members poll each other here (the leader's version gate), with
		// the server identity as for joins.
		s.mux.HandleFunc("GET /v1/cluster/version", s.adminOrPeer(func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, cfg.Version())
		}))
	}
	s.mux.HandleFunc("GET /v1/log/level", s.admin(s.logLevel))
	s.mux.HandleFunc("PUT /v1/log/level", s.admin(s.setLogLevel))
	if cfg.Metrics != nil {
		s.mux.Handle("GET /metrics", cfg.Metrics)
	}
	s.addLockRoutes() // locks.go
	if cfg.Profiling {
		s.addProfileRoutes() // profile.go
	}
	return s
}

// Handler exposes the routes, for tests and for adding more.
func (s *Server) Handler() *http.ServeMux { return s.mux }

// Serve answers on lis until ctx ends.
func (s *Server) Serve(ctx context.Context, lis net.Listener) error {
	hs := &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- hs.Serve(lis) }()
	select {
	case err := <-done:
		return fmt.Errorf("serve admin http: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	<-done
	return nil
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	_, hasLeader := s.cluster.LeaderID()
	if s.cfg.Ready != nil && s.cfg.Ready() && hasLeader {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
		return
	}
	writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "not ready"})
}

type memberView struct {
	Member
	Role string `json:"role"` // leader or follower
	Self bool   `json:"self,omitempty"`
}

func (s *Server) listMembers(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	members, err := s.cluster.Membership(ctx)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	leader, _ := s.cluster.LeaderID()
	out := make([]memberView, 0, len(members))
	for id, raft := range members {
		v := memberView{Member: s.cfg.Describe(id, raft), Role: "follower", Self: id == s.cluster.ReplicaID()}
		if id == leader {
			v.Role = "leader"
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	writeJSON(w, http.StatusOK, map[string]any{"members": out})
}

// addMember adds a voting member. With "replace", a member already
// listed at that address (a node whose data was lost) is removed first
// and the address rejoins under a new replica id: reusing a replica id
// after its log is gone would break Raft's safety.
func (s *Server) addMember(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Address string `json:"address"`
		Replace bool   `json:"replace"`
		// Level is the highest cluster level the joining build reads; a
		// joiner that predates the version gate does not send it.
		Level *int `json:"level"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 4096)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("body must be {\"address\":\"ip:port\"}: %w", err))
		return
	}
	m, err := s.cfg.Resolve(req.Address)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	members, err := s.cluster.Membership(ctx)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	// After the membership read: it is linearizable, so this replica has
	// applied every level entry committed before the request.
	if s.cfg.Version != nil {
		reads := BaselineLevel
		if req.Level != nil {
			reads = *req.Level
		}
		if level := s.cfg.Version().ClusterLevel; reads < level {
			// A member that cannot read the log's encodings would apply
			// them as malformed and diverge: refuse it before Raft knows it.
			err := fmt.Errorf("%s cannot join: the cluster is at level %d and the joining build reads up to level %d; run a build that reads level %d", m.Address, level, reads, level)
			if req.Level == nil {
				err = fmt.Errorf("%s cannot join: the cluster is at level %d, and a join request without \"level\" (a build older than the version gate, or its nacos-lockctl) counts as level %d; start the new node, of a build that reads level %d, with --join, which adds it itself", m.Address, level, BaselineLevel, level)
			}
			s.log.Warn().Err(err).Msg("join refused")
			writeError(w, http.StatusConflict, err)
			return
		}
	}
	if id, ok := memberAt(members, m.RaftAddress); ok {
		if !req.Replace {
			m.ReplicaID = id
			writeJSON(w, http.StatusOK, m) // already a member: adding is idempotent
			return
		}
		if err := s.cluster.RemoveReplica(ctx, id); err != nil {
			writeError(w, membershipErrorStatus(err), err)
			return
		}
		delete(members, id)
		s.log.Warn().Str("member", m.Address).Uint64("replica", id).Msg("member removed to rejoin under a new replica id")
	}
	m.ReplicaID = s.cfg.NewReplicaID(m, members)
	if err := s.cluster.AddReplica(ctx, m.ReplicaID, m.RaftAddress); err != nil {
		writeError(w, membershipErrorStatus(err), err)
		return
	}
	s.log.Info().Str("member", m.Address).Uint64("replica", m.ReplicaID).Msg("member added")
	writeJSON(w, http.StatusOK, m)
}

// membershipErrorStatus is the status of a failed membership change: 409
// when the node's membership cannot change at all (its error says so with
// FixedMembership, as a single-node engine's does), since no retry will
// help; 503 otherwise (no leader, a timeout: try again).
func membershipErrorStatus(err error) int {
	var fixed interface{ FixedMembership() bool }
	if errors.As(err, &fixed) && fixed.FixedMembership() {
		return http.StatusConflict
	}
	return http.StatusServiceUnavailable
}

func memberAt(members map[uint64]string, raftAddr string) (uint64, bool) {
	for id, addr := range members {
		if addr == raftAddr {
			return id, true
		}
	}
	return 0, false
}

func (s *Server) removeMember(w http.ResponseWriter, r *http.Request) {
	m, err := s.cfg.Resolve(strings.TrimSpace(r.PathValue("address")))
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	members, err := s.cluster.Membership(ctx)
	if err != nil {
		writeError(w, http.StatusServiceUnavailable, err)
		return
	}
	id, ok := memberAt(members, m.RaftAddress)
	if !ok {
		writeError(w, http.StatusNotFound, fmt.Errorf("%s is not a member", m.Address))
		return
	}
	if err := s.cluster.RemoveReplica(ctx, id); err != nil {
		writeError(w, membershipErrorStatus(err), err)
		return
	}
	m.ReplicaID = id
	s.log.Info().Str("member", m.Address).Uint64("replica", id).Msg("member removed")
	writeJSON(w, http.StatusOK, m)
}

// login answers the Nacos client's login: username in the query string,
// password in the form body (either may come in the other place too).
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("login form: %w", err))
		return
	}
	username, password := r.Form.Get("username"), r.Form.Get("password")
	if s.cfg.Auth == nil {
		// Auth is off: "logged in, no token", as the client understands it.
		writeJSON(w, http.StatusOK, map[string]any{"tokenTtl": int64(s.cfg.TokenTTL.Seconds()), "globalAdmin": true, "username": username})
		return
	}
	token, u, err := s.cfg.Auth.Login(username, password)
	if err != nil {
		s.log.Warn().Str("user", username).Str("remote", r.RemoteAddr).Msg("login refused")
		writeJSON(w, http.StatusForbidden, map[string]any{"code": http.StatusForbidden, "message": err.Error()})
		return
	}
	s.log.Info().Str("user", username).Str("remote", r.RemoteAddr).Msg("login")
	w.Header().Set("Authorization", "Bearer "+token)
	writeJSON(w, http.StatusOK, map[string]any{
		"accessToken": token, "tokenTtl": int64(s.cfg.Auth.TTL().Seconds()),
		"globalAdmin": u.GlobalAdmin, "username": u.Username,
	})
}

// admin guards an admin route: with auth on, only a global admin's token
// (accessToken query parameter or header, or Authorization: Bearer) passes,
// and the handler finds the user's name with actor (locks.go).
func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Auth == nil {
			h(w, r)
			return
		}
		token := r.URL.Query().Get("accessToken")
		if token == "" {
			token = r.Header.Get("accessToken")
		}
		if token == "" {
			token, _ = strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		}
		u, err := s.cfg.Auth.Verify(token)
		switch {
		case err != nil:
			writeJSON(w, http.StatusForbidden, map[string]any{"code": http.StatusForbidden, "message": err.Error()})
		case !u.GlobalAdmin:
			writeJSON(w, http.StatusForbidden, map[string]any{"code": http.StatusForbidden, "message": auth.ErrForbidden.Error()})
		default:
			h(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u.Username)))
		}
	}
}

// adminOrPeer is admin, but also lets through a request carrying the
// cluster's server identity header.
func (s *Server) adminOrPeer(h http.HandlerFunc) http.HandlerFunc {
	guarded := s.admin(h)
	return func(w http.ResponseWriter, r *http.Request) {
		name, value := s.cfg.Identity[0], s.cfg.Identity[1]
		if s.cfg.Auth != nil && name != "" && value != "" &&
			subtle.ConstantTimeCompare([]byte(r.Header.Get(name)), []byte(value)) == 1 {
			h(w, r)
			return
		}
		guarded(w, r)
	}
}

// logLevel reports the process-wide log level.
func (s *Server) logLevel(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"level": zerolog.GlobalLevel().String()})
}

// setLogLevel changes the process-wide log level at runtime, e.g.
// {"level":"debug"} while chasing a problem.
func (s *Server) setLogLevel(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Level string `json:"level"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1024)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("body must be {\"level\":\"debug\"}: %w", err))
		return
	}
	lvl, err := zerolog.ParseLevel(req.Level)
	if err != nil || req.Level == "" || lvl == zerolog.NoLevel {
		writeError(w, http.StatusBadRequest, fmt.Errorf("level %q: want trace, debug, info, warn or error", req.Level))
		return
	}
	old := zerolog.GlobalLevel()
	zerolog.SetGlobalLevel(lvl)
	s.log.WithLevel(zerolog.InfoLevel).Str("from", old.String()).Str("to", lvl.String()).Msg("log level changed")
	writeJSON(w, http.StatusOK, map[string]string{"level": lvl.String()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, err error) {
	msg := err.Error()
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		code = http.StatusRequestEntityTooLarge
	}
	writeJSON(w, code, map[string]string{"error": msg})
}
