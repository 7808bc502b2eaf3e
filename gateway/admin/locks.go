package admin

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"nacos-lockd/connid"
	"nacos-lockd/gateway/admin/adminapi"
	"nacos-lockd/statemachine/lockview"
)

// Locks is what the lock routes need from the replicated lock table
// (*replica.Node; *replicatest.Local in tests). Reads are
// linearizable (ReadIndex) unless stale, which reads the local replica.
type Locks interface {
	// ListLocks returns one page of held locks in (type, key) order;
	// lockview.ErrUnknownType for a bad type.
	ListLocks(ctx context.Context, q lockview.Query, stale bool) (lockview.Page, error)
	// GetLock returns one lock; lockview.ErrNotFound when it is free.
	GetLock(ctx context.Context, lockType, key string, stale bool) (lockview.Lock, error)
	// ForceRelease commits FORCE_RELEASE: the grant with this fencing
	// token ends whoever holds it and the lock passes to its next waiter.
	// lockview.ErrChanged when another grant holds it, ErrNotFound when
	// the lock is free.
	ForceRelease(ctx context.Context, lockType, key string, token uint64) error
}

// Connections lists this node's registered client connections
// (*gateway.Server).
type Connections interface {
	Connections() []Connection
}

// Connection is one registered client connection, as GET /v1/connections
// shows it.
type Connection struct {
	ID            string    `json:"connectionId"`
	Remote        string    `json:"remote"`        // TCP peer ip:port
	ClientIP      string    `json:"clientIp"`      // what the client says its IP is (setup metadata)
	ClientVersion string    `json:"clientVersion"` // e.g. Nacos-Java-Client:v3.1.1
	AppName       string    `json:"appName"`       // the AppName label, "" if none
	Since         time.Time `json:"since"`         // when the transport was accepted
}

// Lock and Waiter are the lock routes' JSON. They are defined in
// adminapi, which imports nothing, so nacos-lockctl decodes into the same
// types without the server's dependencies; lockJSON makes them.
type (
	Lock   = adminapi.Lock
	Waiter = adminapi.Waiter
)

const (
	maxListLimit     = lockview.MaxListLimit
	defaultListLimit = lockview.DefaultListLimit
	// forceReleaseSuffix ends a force-release path: a {key...} wildcard
	// must be the last segment of a pattern, so the route is the key's and
	// the suffix is cut off here.
	forceReleaseSuffix = "/force-release"
)

func (s *Server) addLockRoutes() {
	s.now = time.Now
	s.m = newMetrics(s.cfg.Registerer)
	if s.cfg.Locks != nil {
		// A key is the URL-escaped rest of the path, "/" included; or, in
		// any of these, the ?key= parameter (see lockKey).
		s.mux.HandleFunc("GET /v1/locks", s.admin(s.listLocks))
		s.mux.HandleFunc("GET /v1/locks/{lockType}", s.admin(s.getLock))
		s.mux.HandleFunc("GET /v1/locks/{lockType}/{key...}", s.admin(s.getLock))
		s.mux.HandleFunc("POST /v1/locks/{lockType}/{key...}", s.admin(s.forceRelease))
	}
	if s.cfg.Connections != nil {
		s.mux.HandleFunc("GET /v1/connections", s.admin(s.listConnections))
	}
}

// listLocks answers GET /v1/locks?type=&prefix=&limit=&cursor=&stale=.
func (s *Server) listLocks(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	stale, err := staleParam(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	query := lockview.Query{Type: q.Get("type"), Prefix: q.Get("prefix"), Limit: defaultListLimit}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxListLimit {
			writeError(w, http.StatusBadRequest, fmt.Errorf("limit %q: want 1 to %d", v, maxListLimit))
			return
		}
		query.Limit = n
	}
	if c := q.Get("cursor"); c != "" {
		if query.AfterType, query.AfterKey, err = decodeCursor(c); err != nil {
			writeError(w, http.StatusBadRequest, err)
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	page, err := s.cfg.Locks.ListLocks(ctx, query, stale)
	if err != nil {
		s.readError(w, err)
		return
	}
	now := s.now()
	out := struct {
		Locks        []Lock `json:"locks"`
		NextCursor   string `json:"nextCursor"` // "" on the last page
		Consistency  string `json:"consistency"`
		AppliedIndex uint64 `json:"appliedIndex"`
	}{Locks: make([]Lock, len(page.Locks)), Consistency: consistency(stale), AppliedIndex: page.Applied}
	for i, l := range page.Locks {
		out.Locks[i] = lockJSON(l, now)
	}
	if page.More && len(page.Locks) > 0 {
		last := page.Locks[len(page.Locks)-1]
		out.NextCursor = encodeCursor(last.Type, last.Key)
	}
	writeJSON(w, http.StatusOK, out)
}

// getLock answers GET /v1/locks/{lockType}/{key...} (or ?key=).
func (s *Server) getLock(w http.ResponseWriter, r *http.Request) {
	typ := r.PathValue("lockType")
	key, err := lockKey(r, r.PathValue("key"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	stale, err := staleParam(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	l, err := s.cfg.Locks.GetLock(ctx, typ, key, stale)
	if err != nil {
		s.readError(w, err)
		return
	}
	out := struct {
		Lock
		Consistency string `json:"consistency"`
	}{lockJSON(l, s.now()), consistency(stale)}
	writeJSON(w, http.StatusOK, out)
}

// forceRelease answers POST /v1/locks/{lockType}/{key...}/force-release
// (or /v1/locks/{lockType}/force-release?key=), optionally
// &fencingToken=N to release only that grant. It reads the holder
// linearizably, then releases exactly that grant (its token), so the
// audit names the holder that lost the lock; when the lock changed hands
// in between and no token was given, it reads again (three reads at most).
func (s *Server) forceRelease(w http.ResponseWriter, r *http.Request) {
	typ := r.PathValue("lockType")
	rest := r.PathValue("key")
	if rest != "force-release" && !strings.HasSuffix(rest, forceReleaseSuffix) {
		writeError(w, http.StatusNotFound, errors.New("POST /v1/locks/{lockType}/{key}/force-release is the only lock write"))
		return
	}
	var fromPath string // empty for /v1/locks/{lockType}/force-release?key=
	if rest != "force-release" {
		fromPath = strings.TrimSuffix(rest, forceReleaseSuffix)
	}
	key, err := lockKey(r, fromPath)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	var want uint64
	if v := r.URL.Query().Get("fencingToken"); v != "" {
		if want, err = strconv.ParseUint(v, 10, 64); err != nil || want == 0 {
			writeError(w, http.StatusBadRequest, fmt.Errorf("fencingToken %q: want a positive integer", v))
			return
		}
	}
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
	defer cancel()
	var prev lockview.Lock
	for attempt := 1; ; attempt++ {
		prev, err = s.cfg.Locks.GetLock(ctx, typ, key, false)
		if err == nil && want != 0 && prev.Token != want {
			err = lockview.ErrChanged
		}
		if err == nil {
			err = s.cfg.Locks.ForceRelease(ctx, typ, key, prev.Token)
		}
		if !errors.Is(err, lockview.ErrChanged) || want != 0 || attempt == 3 {
			break
		}
	}
	switch {
	case errors.Is(err, lockview.ErrChanged):
		s.m.forceRelease("conflict")
		msg := fmt.Sprintf("%s %q changed hands while being released, three times: not released", typ, key)
		var current *Lock
		if cur, err := s.cfg.Locks.GetLock(ctx, typ, key, false); err == nil {
			c := lockJSON(cur, s.now())
			current = &c
			if want != 0 {
				msg = fmt.Sprintf("%s %q is held under fencing token %d, not %d: not released", typ, key, cur.Token, want)
			}
		}
		writeJSON(w, http.StatusConflict, map[string]any{"error": msg, "current": current})
		return
	case errors.Is(err, lockview.ErrNotFound):
		s.m.forceRelease("not_held")
		writeError(w, http.StatusNotFound, fmt.Errorf("%s %q is not held: nothing to release", typ, key))
		return
	case errors.Is(err, lockview.ErrUnknownType):
		s.readError(w, err)
		return
	case err != nil:
		s.m.forceRelease("error")
		if prev.Token != 0 {
			// The proposal may or may not have committed (a timeout is
			// ambiguous): an attempt is audited too.
			s.audit(r, typ, key, prev).Err(err).Msg("lock force release attempted, outcome unknown")
		}
		s.readError(w, err)
		return
	}
	s.m.forceRelease("released")
	now := s.now()
	who, _ := actor(r)
	var current *Lock
	ev := s.audit(r, typ, key, prev)
	if cur, err := s.cfg.Locks.GetLock(ctx, typ, key, false); err == nil {
		c := lockJSON(cur, now)
		current = &c
		ev = ev.Bool("handed_off", true).Uint64("next_token", cur.Token)
	} else if errors.Is(err, lockview.ErrNotFound) {
		ev = ev.Bool("handed_off", false)
	}
	ev.Msg("lock force-released")
	s.log.Debug().Str("lock_type", typ).Str("key", key).Str("prev_owner", prev.Owner).Msg("force-released lock detail")
	writeJSON(w, http.StatusOK, map[string]any{
		"released": true, "type": typ, "key": key, "by": who,
		"at": now.UTC().Format(time.RFC3339Nano), "previous": lockJSON(prev, now), "current": current,
	})
}

// audit starts the audit record of a force release, at warn: who, from
// where, which lock and its holder. Keys and owners appear only hashed
// (the logging rules); the connection, client IP and fencing token
// identify the holder, and the API caller gets the full record in the
// reply. The log line's time is when.
func (s *Server) audit(r *http.Request, typ, key string, prev lockview.Lock) *zerolog.Event {
	who, via := actor(r)
	prevIP, _ := parseConnID(prev.ConnID)
	return s.log.Warn().Str("audit", "force_release").Str("by", who).Str("by_kind", via).Str("remote", r.RemoteAddr).
		Str("lock_type", typ).Str("key_hash", hashOf(key)).
		Str("prev_conn_id", prev.ConnID).Str("prev_client_ip", prevIP).Str("prev_owner_hash", hashOf(prev.Owner)).
		Uint64("prev_token", prev.Token).Int32("prev_count", prev.Count)
}

// listConnections answers GET /v1/connections.
func (s *Server) listConnections(w http.ResponseWriter, _ *http.Request) {
	conns := s.cfg.Connections.Connections()
	if conns == nil {
		conns = []Connection{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"replicaId": s.cluster.ReplicaID(), "connections": conns})
}

// readError maps a lock reader's error to a status.
func (s *Server) readError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, lockview.ErrUnknownType):
		writeError(w, http.StatusBadRequest, err)
	case errors.Is(err, lockview.ErrNotFound):
		writeError(w, http.StatusNotFound, err)
	default:
		writeError(w, http.StatusServiceUnavailable, err)
	}
}

// lockKey picks the key from the path rest or the ?key= parameter; one,
// not both. The path form is the key URL-escaped, "/" allowed as is
// except where the path would be cleaned ("//", "." and ".." segments),
// so clients escape the whole key as one segment (url.PathEscape, with a
// key of "." or ".." as %2E).
func lockKey(r *http.Request, fromPath string) (string, error) {
	q, hasQuery := r.URL.Query()["key"]
	switch {
	case fromPath != "" && hasQuery:
		return "", errors.New("give the key in the path or as ?key=, not both")
	case hasQuery && q[0] != "":
		return q[0], nil
	case fromPath != "":
		return fromPath, nil
	}
	return "", errors.New("a lock key is required: /v1/locks/{lockType}/{key} or ?key= (to list a type: /v1/locks?type=)")
}

func staleParam(r *http.Request) (bool, error) {
	v := r.URL.Query().Get("stale")
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("stale %q: want true or false", v)
	}
	return b, nil
}

func consistency(stale bool) string {
	if stale {
		return "stale"
	}
	return "linearizable"
}

// Cursors are opaque to clients: "1\n<type>\n<key>" in unpadded
// base64url, the last lock of the page before.
const cursorVersion = "1"

func encodeCursor(typ, key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(cursorVersion + "\n" + typ + "\n" + key))
}

func decodeCursor(c string) (typ, key string, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return "", "", errors.New("cursor: not one this server issued")
	}
	v, rest, ok1 := strings.Cut(string(b), "\n")
	typ, key, ok2 := strings.Cut(rest, "\n")
	if !ok1 || !ok2 || v != cursorVersion || typ == "" {
		return "", "", errors.New("cursor: not one this server issued")
	}
	return typ, key, nil
}

// lockJSON is the one mapping of a lock as read to its JSON.
func lockJSON(l lockview.Lock, now time.Time) Lock {
	ip, node := parseConnID(l.ConnID)
	out := Lock{
		Type: l.Type, Key: l.Key, Owner: l.Owner, ConnectionID: l.ConnID, ClientIP: ip, Node: node,
		FencingToken: l.Token, ReentrantCount: l.Count, AcquiredAtMs: l.AcquiredAtMs,
		LeaseEndMs: l.LeaseEndMs, LeaseEnd: msTime(l.LeaseEndMs), TimeLeftMs: timeLeft(l.LeaseEndMs, now),
		Unclaimed: l.Unclaimed, Waiters: make([]Waiter, len(l.Waiters)),
	}
	if l.AcquiredAtMs != 0 {
		out.AcquiredAt = msTime(l.AcquiredAtMs)
	}
	for i, wt := range l.Waiters {
		wip, _ := parseConnID(wt.ConnID)
		out.Waiters[i] = Waiter{Position: i, Owner: wt.Owner, ConnectionID: wt.ConnID, ClientIP: wip,
			DeadlineMs: wt.DeadlineMs, Deadline: msTime(wt.DeadlineMs), TimeLeftMs: timeLeft(wt.DeadlineMs, now)}
	}
	return out
}

func msTime(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }

func timeLeft(endMs int64, now time.Time) int64 { return max(0, endMs-now.UnixMilli()) }

// parseConnID reads the client IP and node id out of a connection id
// (package connid): the node is "" for Nacos's ids (an imported lock's),
// both are "" for a foreign id.
func parseConnID(id string) (ip, node string) {
	c, ok := connid.Parse(id)
	if !ok {
		return "", ""
	}
	return c.IP, c.Node
}

// hashOf is how keys and owners appear in logs at info and above: the
// first 8 bytes of their SHA-256, in hex.
func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

// metrics are the API's series; nil records nothing.
type metrics struct {
	forceReleases *prometheus.CounterVec // result
}

func newMetrics(reg prometheus.Registerer) *metrics {
	if reg == nil {
		return nil
	}
	m := &metrics{forceReleases: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nacoslockd_admin_force_releases_total",
		Help: "Force releases through the admin API by result: released, not_held, conflict (held under another fencing token), error."},
		[]string{"result"})}
	reg.MustRegister(m.forceReleases)
	for _, r := range []string{"released", "not_held", "conflict", "error"} {
		m.forceReleases.WithLabelValues(r)
	}
	return m
}

func (m *metrics) forceRelease(result string) {
	if m != nil {
		m.forceReleases.WithLabelValues(result).Inc()
	}
}

type userKey struct{}

// actor names who made an admin request, for the audit log: the admin
// user when auth is on, else the remote address.
func actor(r *http.Request) (who, via string) {
	if u, ok := r.Context().Value(userKey{}).(string); ok {
		return u, "user"
	}
	return r.RemoteAddr, "remote_address"
}
