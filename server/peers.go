package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"net/http"
	"sort"
	"strconv"
	"time"

	"nacos-lockd/compat"
	"nacos-lockd/gateway/admin"
	"nacos-lockd/statemachine"
)

// peerDirectory maps between cluster.conf addresses, Raft addresses and
// replica ids, for the admin API and the dead-node monitor.
type peerDirectory struct {
	byRaft   map[string]compat.Member // cluster.conf members by Raft address
	node     membership               // nil only for the directory a join uses before Raft starts
	scheme   string                   // of the members' main ports: http, or https with server.ssl
	identity [2]string                // server identity header, sent when joining
	client   *http.Client
}

// membership is what the directory reads from the Raft node: the current
// members, for the dead-node monitor's health checks.
type membership interface {
	Membership(ctx context.Context) (map[uint64]string, error)
}

func newPeerDirectory(members []compat.Member, httpsPorts bool, identity [2]string, node membership) *peerDirectory {
	d := &peerDirectory{byRaft: map[string]compat.Member{}, node: node, scheme: "http", identity: identity, client: peerClient}
	if httpsPorts {
		d.scheme = "https"
	}
	for _, m := range members {
		d.byRaft[m.RaftAddress()] = m
	}
	return d
}

func (d *peerDirectory) resolve(address string) (admin.Member, error) {
	m, err := compat.ParseMember(address)
	if err != nil {
		return admin.Member{}, err
	}
	return admin.Member{Address: m.Address(), RaftAddress: m.RaftAddress()}, nil
}

// newReplicaID picks an id for a member added at runtime. It mixes the
// time in, because a removed id can never come back.
func newReplicaID(m admin.Member, members map[uint64]string) uint64 {
	for salt := time.Now().UnixNano(); ; salt++ {
		h := fnv.New64a()
		fmt.Fprintf(h, "%s#%d", m.Address, salt)
		id := h.Sum64() &^ (1 << 63)
		if _, used := members[id]; id != 0 && !used {
			return id
		}
	}
}

// describe names a Raft member. Members not in this node's cluster.conf
// (added at runtime) are assumed to use the standard port layout.
func (d *peerDirectory) describe(id uint64, raftAddr string) admin.Member {
	if m, ok := d.byRaft[raftAddr]; ok {
		return admin.Member{ReplicaID: id, Address: m.Address(), RaftAddress: raftAddr}
	}
	addr := raftAddr
	if host, port, err := net.SplitHostPort(raftAddr); err == nil {
		if p, err := strconv.Atoi(port); err == nil {
			addr = net.JoinHostPort(host, strconv.Itoa(p+1000))
		}
	}
	return admin.Member{ReplicaID: id, Address: addr, RaftAddress: raftAddr}
}

func (d *peerDirectory) sorted(members map[uint64]string) []admin.Member {
	out := make([]admin.Member, 0, len(members))
	for id, raft := range members {
		out = append(out, d.describe(id, raft))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return out
}

// alive reports whether a node, by the id its connection ids end with, is
// a current member answering its health check.
func (d *peerDirectory) alive(ctx context.Context, node string) bool {
	id, err := strconv.ParseUint(node, 10, 64)
	if err != nil || d.node == nil {
		return false
	}
	members, err := d.node.Membership(ctx)
	if err != nil {
		return true // cannot tell: never release on our own failure
	}
	raft, ok := members[id]
	if !ok {
		return false // removed from the cluster
	}
	m := d.describe(id, raft)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s://%s/healthz", d.scheme, m.Address), nil)
	if err != nil {
		return false
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// joinCluster asks the other members listed in cluster.conf to add this
// node (replacing an earlier incarnation at the same address) and returns
// the replica id it was given. It retries until a member answers.
func joinCluster(ctx context.Context, cfg Config, d *peerDirectory) (uint64, error) {
	// level: what this build reads; a member refuses a joiner below the
	// cluster's level (the version gate, gate.go).
	body, _ := json.Marshal(map[string]any{"address": cfg.Self.Address(), "replace": true, "level": statemachine.MaxLevel})
	var last error
	for {
		for _, m := range cfg.Members {
			if m == cfg.Self {
				continue
			}
			id, err := d.requestJoin(ctx, m.Address(), body)
			if err == nil {
				return id, nil
			}
			if errors.Is(err, errJoinRefused) {
				return 0, err // asking again, or another member, gets the same answer
			}
			last = err
		}
		t := time.NewTimer(time.Second)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, fmt.Errorf("join the cluster: %w (last error: %v)", ctx.Err(), last)
		case <-t.C:
		}
	}
}

func (d *peerDirectory) requestJoin(ctx context.Context, peer string, body []byte) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.scheme+"://"+peer+"/v1/cluster/members", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if d.identity[0] != "" {
		req.Header.Set(d.identity[0], d.identity[1])
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var out struct {
		ReplicaID uint64 `json:"replicaId"`
		Error     string `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, fmt.Errorf("join via %s: %w", peer, err)
	}
	if resp.StatusCode == http.StatusConflict {
		return 0, fmt.Errorf("%w via %s: %s", errJoinRefused, peer, out.Error)
	}
	if resp.StatusCode != http.StatusOK || out.ReplicaID == 0 {
		return 0, fmt.Errorf("join via %s: %d %s", peer, resp.StatusCode, out.Error)
	}
	return out.ReplicaID, nil
}

// errJoinRefused is a member's refusal of the join itself (the version
// gate: this build cannot read the cluster's level).
var errJoinRefused = errors.New("join refused")

// peerClient talks to other members' main ports: health checks and join
// requests. It does not verify their certificates: a health probe carries
// nothing secret, and a forged answer could only delay a cleanup, never
// release a lock.
var peerClient = &http.Client{Transport: &http.Transport{
	DisableKeepAlives: true,
	TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // see above
}}
