package compat

import (
	"bufio"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
)

// Member is one line of Nacos's cluster.conf: a node's host and main port.
// Its SDK gRPC port is Port+1000 and its Raft port Port-1000 unless the
// line names one with ?raft_port=.
type Member struct {
	// Host is an IP address or a DNS name (lower case), as cluster.conf
	// lists it. A name is never replaced by what it resolves to: the Raft
	// transport dials the name, so a node that comes back with a new IP
	// (a StatefulSet pod) is reached at its new address under its old id.
	Host     string
	Port     int
	RaftPort int
}

// Address is the member as cluster.conf writes it: ip:mainport.
func (m Member) Address() string { return net.JoinHostPort(m.Host, strconv.Itoa(m.Port)) }

// RaftAddress is the member's Raft transport address.
func (m Member) RaftAddress() string { return net.JoinHostPort(m.Host, strconv.Itoa(m.RaftPort)) }

// IsName reports whether the member is listed by DNS name, not by IP.
func (m Member) IsName() bool { return net.ParseIP(m.Host) == nil }

// GRPCPort is the SDK port clients use.
func (m Member) GRPCPort() int { return m.Port + 1000 }

// ReplicaID derives the member's Raft replica id from its address as
// written (a name, not the IP it resolves to), so every node computes the
// same ids from the same file, an id never depends on the order of lines
// or on who else is a member (membership changes keep existing ids), and a
// member listed by name keeps its id when its IP changes. FNV-1a 64,
// never 0.
func (m Member) ReplicaID() uint64 {
	h := fnv.New64a()
	h.Write([]byte(m.Address()))
	id := h.Sum64() &^ (1 << 63) // keep ids readable as signed in other tools
	if id == 0 {
		id = 1
	}
	return id
}

// LoadClusterConf reads a cluster.conf file.
func LoadClusterConf(path string) ([]Member, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open cluster conf: %w", err)
	}
	defer f.Close()
	members, err := ParseClusterConf(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return members, nil
}

// ParseClusterConf reads Nacos's cluster.conf format: one member per line
// (or several separated by commas), "host" or "host:port" with the main
// port (default 8848), where host is an IP address or a DNS name, an optional "?raft_port=N", and "#" comments, whole-line
// or trailing. Members are returned sorted by address, duplicates refused.
func ParseClusterConf(r io.Reader) ([]Member, error) {
	var members []Member
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		for _, field := range strings.Split(text, ",") {
			field = strings.TrimSpace(field)
			if field == "" {
				continue
			}
			m, err := parseMember(field)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
			if prev, dup := seen[m.Address()]; dup {
				return nil, fmt.Errorf("line %d: %s is already listed on line %d", line, m.Address(), prev)
			}
			seen[m.Address()] = line
			members = append(members, m)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read cluster conf: %w", err)
	}
	if len(members) == 0 {
		return nil, errors.New("cluster conf lists no members")
	}
	sort.Slice(members, func(i, j int) bool { return members[i].Address() < members[j].Address() })
	ids := map[uint64]string{}
	for _, m := range members {
		if other, clash := ids[m.ReplicaID()]; clash {
			return nil, fmt.Errorf("members %s and %s map to the same replica id; change one address", other, m.Address())
		}
		ids[m.ReplicaID()] = m.Address()
	}
	return members, nil
}

// ParseMember reads one member address as cluster.conf writes it.
func ParseMember(s string) (Member, error) { return parseMember(strings.TrimSpace(s)) }

func parseMember(s string) (Member, error) {
	addr, query, _ := strings.Cut(s, "?")
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		host, portText = addr, strconv.Itoa(DefaultServerPort) // "ip" alone: Nacos's default port
	}
	if net.ParseIP(host) == nil {
		// DNS is case-insensitive; one spelling keeps one replica id.
		host = strings.ToLower(host)
		if !IsHostName(host) {
			return Member{}, fmt.Errorf("member %q: %q is neither an IP address nor a DNS name (letters, digits and '-' in dot-separated labels)", s, host)
		}
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1001 || port > 64535 {
		return Member{}, fmt.Errorf("member %q: main port must be a number in 1001..64535 (port-1000 and port+1000 are used too)", s)
	}
	m := Member{Host: host, Port: port, RaftPort: port - 1000}
	if query != "" {
		q, err := url.ParseQuery(query)
		if err != nil {
			return Member{}, fmt.Errorf("member %q: %w", s, err)
		}
		if v := q.Get("raft_port"); v != "" {
			rp, err := strconv.Atoi(v)
			if err != nil || rp < 1 || rp > 65535 {
				return Member{}, fmt.Errorf("member %q: raft_port %q is not a port", s, v)
			}
			m.RaftPort = rp
		}
	}
	return m, nil
}

// FindMember returns the member with this host and main port.
func FindMember(members []Member, host string, port int) (Member, bool) {
	if net.ParseIP(host) == nil {
		host = strings.ToLower(host) // as ParseClusterConf writes names
	}
	want := net.JoinHostPort(host, strconv.Itoa(port))
	for _, m := range members {
		if m.Address() == want {
			return m, true
		}
	}
	return Member{}, false
}

// IsHostName reports whether s is a DNS name as RFC 1123 allows one:
// dot-separated labels of 1-63 letters, digits and hyphens, not starting
// or ending with a hyphen, 253 characters at most, and not all digits
// (which would read as a mistyped IPv4 address). dragonboat's address
// check accepts every such name.
func IsHostName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	allDigits := true
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
				allDigits = false
			default:
				return false
			}
		}
	}
	return !allDigits
}
