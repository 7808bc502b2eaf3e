package procs

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// Member is one entry of GET /v1/cluster/members.
type Member struct {
	ReplicaID uint64 `json:"replicaId"`
	Address   string `json:"address"`
	Role      string `json:"role"`
	Self      bool   `json:"self"`
}

// Members asks the node whose main port is httpAddr for the membership,
// waiting at most timeout. (The server bounds its own ReadIndex at 10 s.)
func Members(httpAddr string, timeout time.Duration) ([]Member, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+"/v1/cluster/members", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out struct {
		Members []Member `json:"members"`
		Error   string   `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("members: %d %s", resp.StatusCode, out.Error)
	}
	return out.Members, nil
}
