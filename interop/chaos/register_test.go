package chaos

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// The fenced register is the resource the locks protect: a tiny service
// holding one counter per lock, which rejects any read or write carrying a
// fencing token lower than the highest it has seen for that lock (Kleppmann's
// fencing). Clients increment it inside their critical sections with a
// compare-and-set (expect, value). If two sessions ever worked under the
// same token, or a later grant carried a lower token than an earlier one
// that had already written, an accepted write would find a value it did not
// expect (a lost update) or the same token used by two sessions: both are
// recorded as violations. Stale writes (from a client that overran its
// lease or was paused past it) are rejected and counted.

type regRequest struct {
	Lock   string `json:"lock"`
	Token  uint64 `json:"token"`
	Sess   string `json:"sess"`
	Expect int64  `json:"expect"`
	Value  int64  `json:"value"`
}

type regReply struct {
	Accepted bool   `json:"accepted"`
	Value    int64  `json:"value"`
	Max      uint64 `json:"max"`
}

type regCell struct {
	max   uint64
	value int64
	users map[uint64]string // token -> session that used it
}

type regEvent struct {
	Ts       int64  `json:"ts"`
	Op       string `json:"op"`
	Lock     string `json:"lock"`
	Token    uint64 `json:"token"`
	Sess     string `json:"sess"`
	Expect   int64  `json:"expect,omitempty"`
	Value    int64  `json:"value"`
	Accepted bool   `json:"accepted"`
	Max      uint64 `json:"max"` // highest token seen before this call
}

type regStats struct {
	Reads, Writes       int
	StaleReads          int // rejected: token below the highest seen
	StaleWrites         int
	Violations          []string
	StaleWriteSessions  map[string]int
	AcceptedWritesByKey map[string]int
}

type fencedRegister struct {
	mu     sync.Mutex
	cells  map[string]*regCell
	log    *os.File
	stats  regStats
	server *http.Server
	URL    string
}

// startRegister serves the register on a loopback port; events go to logPath.
func startRegister(logPath string) (*fencedRegister, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	r := &fencedRegister{cells: map[string]*regCell{}, log: f,
		stats: regStats{StaleWriteSessions: map[string]int{}, AcceptedWritesByKey: map[string]int{}}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /read", func(w http.ResponseWriter, req *http.Request) { r.serve(w, req, "read") })
	mux.HandleFunc("POST /write", func(w http.ResponseWriter, req *http.Request) { r.serve(w, req, "write") })
	r.server = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	r.URL = "http://" + lis.Addr().String()
	go func() { _ = r.server.Serve(lis) }()
	return r, nil
}

func (r *fencedRegister) close() {
	_ = r.server.Close()
	r.mu.Lock()
	_ = r.log.Close()
	r.mu.Unlock()
}

func (r *fencedRegister) serve(w http.ResponseWriter, req *http.Request, op string) {
	var in regRequest
	if err := json.NewDecoder(req.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out := r.do(op, in)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// do is the register's whole logic, under one mutex: every call is atomic.
func (r *fencedRegister) do(op string, in regRequest) regReply {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.cells[in.Lock]
	if c == nil {
		c = &regCell{users: map[uint64]string{}}
		r.cells[in.Lock] = c
	}
	ev := regEvent{Ts: time.Now().UnixNano(), Op: op, Lock: in.Lock, Token: in.Token, Sess: in.Sess, Max: c.max}
	out := regReply{Max: c.max}
	if op == "read" {
		r.stats.Reads++
	} else {
		r.stats.Writes++
	}
	switch {
	case in.Token == 0 || in.Token < c.max:
		if op == "read" {
			r.stats.StaleReads++
		} else {
			r.stats.StaleWrites++
			r.stats.StaleWriteSessions[in.Sess]++
		}
	default:
		if u, ok := c.users[in.Token]; ok && u != in.Sess {
			r.stats.Violations = append(r.stats.Violations,
				fmt.Sprintf("%s: token %d used by two sessions, %s and %s", in.Lock, in.Token, u, in.Sess))
		}
		c.users[in.Token] = in.Sess
		c.max = in.Token
		out.Accepted = true
		if op == "write" {
			ev.Expect = in.Expect
			if in.Expect != c.value {
				r.stats.Violations = append(r.stats.Violations,
					fmt.Sprintf("%s: lost update: %s wrote %d under token %d expecting %d, but the register held %d",
						in.Lock, in.Sess, in.Value, in.Token, in.Expect, c.value))
			}
			c.value = in.Value
			r.stats.AcceptedWritesByKey[in.Lock]++
		}
	}
	out.Value = c.value
	ev.Value, ev.Accepted = c.value, out.Accepted
	b, _ := json.Marshal(ev)
	_, _ = r.log.Write(append(b, '\n'))
	return out
}

func (r *fencedRegister) snapshot() regStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.stats
	s.Violations = append([]string(nil), r.stats.Violations...)
	return s
}
