// Package adminapi is the JSON of the admin API's lock routes: the
// types the server (gateway/admin) writes and nacos-lockctl decodes, so
// the two cannot drift apart. It imports nothing, so the CLI gets no
// server dependency with it (cmd/nacos-lockctl/imports_test.go).
package adminapi

// Lock is one held lock as the lock routes show it. Times are Unix
// milliseconds (the table clock, the leader's wall clock) with an RFC 3339
// copy for people; time left is counted from this node's clock at the
// read.
//
// It is not lockview.Lock, the value the server reads, because the JSON
// is an interface of its own (nacos-lockctl, operators' scripts): its
// field names differ (connectionId, fencingToken, reentrantCount), and it
// adds what the server derives at the read: client IP and node from the
// connection id, time left, RFC 3339 times, waiters' positions.
// gateway/admin makes it from a lockview.Lock in one place (lockJSON).
type Lock struct {
	Type           string   `json:"type"`
	Key            string   `json:"key"`
	Owner          string   `json:"owner"`
	ConnectionID   string   `json:"connectionId"`
	ClientIP       string   `json:"clientIp"` // from the connection id; "" when it is not one of ours
	Node           string   `json:"node"`     // replica id of the node holding the connection
	FencingToken   uint64   `json:"fencingToken"`
	ReentrantCount int32    `json:"reentrantCount"`
	AcquiredAtMs   int64    `json:"acquiredAtMs"` // 0: unknown (granted before it was recorded, or imported)
	AcquiredAt     string   `json:"acquiredAt,omitempty"`
	LeaseEndMs     int64    `json:"leaseEndMs"`
	LeaseEnd       string   `json:"leaseEnd"`
	TimeLeftMs     int64    `json:"timeLeftMs"` // 0 once the lease is over (the reaper ends it)
	Unclaimed      bool     `json:"unclaimed"`  // handed to a waiter that has not claimed it yet
	Waiters        []Waiter `json:"waiters"`    // in queue order
}

// Waiter is one queued waiter of a Lock.
type Waiter struct {
	Position     int    `json:"position"` // 0 is next
	Owner        string `json:"owner"`
	ConnectionID string `json:"connectionId"`
	ClientIP     string `json:"clientIp"`
	DeadlineMs   int64  `json:"deadlineMs"`
	Deadline     string `json:"deadline"`
	TimeLeftMs   int64  `json:"timeLeftMs"`
}

// BuildLevel is the highest cluster level this release reads
// (statemachine.MaxLevel; package server's tests keep the two equal).
// nacos-lockctl's cluster add sends it: the tool vouches for a new node of
// its own release, and the node's own --join request is checked again.
const BuildLevel = 3

// Versions is what a build reads (statemachine.Versions): the cluster
// level it adds up to and the highest command, batch frame, record and
// snapshot versions.
type Versions struct {
	Level    int `json:"level"`
	Command  int `json:"command"`
	Frame    int `json:"frame"`
	Record   int `json:"record"`
	Snapshot int `json:"snapshot"`
}

// Version is GET /v1/cluster/version: what this node's build reads, which
// the leader's version gate polls from every member, and the cluster level
// its replica has applied. On the leader, Members is the gate's latest
// poll.
type Version struct {
	Build        string          `json:"build"`
	Commit       string          `json:"commit"`
	Reads        Versions        `json:"reads"`
	ClusterLevel int             `json:"clusterLevel"`
	Members      []MemberVersion `json:"members,omitempty"`
}

// MemberVersion is one member as the leader's version gate last polled
// it: what it advertised, or that it does not advertise (a build without
// the gate, counted as the baseline level) or did not answer.
type MemberVersion struct {
	ReplicaID  uint64    `json:"replicaId"`
	Address    string    `json:"address"`
	Advertised bool      `json:"advertised"`
	Level      int       `json:"level"` // the level the gate counts it at; 0 when it did not answer
	Build      string    `json:"build,omitempty"`
	Reads      *Versions `json:"reads,omitempty"`
	Error      string    `json:"error,omitempty"`
}
