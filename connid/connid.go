// Package connid is the connection id a gateway gives every client
// transport: <epochMillis>_<ip>_<port>_<node>. The lock table records it
// for every holder and waiter, and dead-node cleanup reads the node out of
// it, so this package is the one place that writes or reads one. It is
// pure (standard library only, no clock or randomness of its own), so the
// deterministic state machine may use it.
//
// Two shapes parse:
//
//   - ours, <millis>_<ip>_<port>_<node>: the millis end at the first '_',
//     the node follows the last '_' and the port the second-to-last, and
//     the IP is everything between, so an IPv6 zone may contain '_'
//     ("1700000000000_fe80::1%eth_0_5000_3" is IP "fe80::1%eth_0");
//   - Nacos's, <millis>_<ip>_<port>: what the Java server mints, found in
//     locks imported from a Nacos snapshot, and ours when no node id is
//     configured. Parse gives it Node "".
//
// Numbers must be written as String writes them (decimal, no sign on the
// port and node, no leading zeros), the port must be at most 65535, the
// node must be a decimal replica id that fits in a uint64, and the IP must
// not be empty. Anything else is foreign: Parse reports false and NodeOf
// "".
//
// When both shapes fit, ours wins. That happens only for an id without a
// node whose IP ends in '_' and a port number ("..._fe80::1%eth_0_5000"
// reads as IP "fe80::1%eth", port 0, node "5000"): an IPv6 zone ending
// that way in an id minted without a node id. Every id with a node, and
// every id whose IP has no '_', round-trips.
package connid

import (
	"math"
	"net"
	"strconv"
	"strings"
	"time"
)

// Unknown is the IP of an id minted for a remote address that is not
// host:port.
const Unknown = "unknown"

// ID is a parsed connection id.
type ID struct {
	Millis int64  // when the transport was accepted, Unix milliseconds
	IP     string // the peer's host as net.SplitHostPort gives it, or Unknown
	Port   uint16 // the peer's port; 0 when unknown
	Node   string // the minting node's replica id in decimal; "" for Nacos's ids
}

// New mints the id of a transport accepted at now from remote, on the
// node with the given id ("" for none). It follows Java's
// <epochMillis>_<peerIp>_<peerPort> and adds the node id, so ids stay
// unique across a cluster and across restarts. A remote that is nil or not
// host:port with a numeric port gets IP Unknown and port 0; an empty host
// gets IP Unknown.
func New(now time.Time, remote net.Addr, node string) ID {
	id := ID{Millis: now.UnixMilli(), IP: Unknown, Node: node}
	if remote == nil {
		return id
	}
	h, p, err := net.SplitHostPort(remote.String())
	if err != nil {
		return id
	}
	port, ok := parsePort(p)
	if !ok {
		return id
	}
	if h != "" {
		id.IP = h
	}
	id.Port = port
	return id
}

// String formats the id: the one function that writes connection ids.
// An id with Node "" is written in Nacos's shape.
func (id ID) String() string {
	b := make([]byte, 0, 20+1+len(id.IP)+1+5+1+len(id.Node))
	b = strconv.AppendInt(b, id.Millis, 10)
	b = append(b, '_')
	b = append(b, id.IP...)
	b = append(b, '_')
	b = strconv.AppendUint(b, uint64(id.Port), 10)
	if id.Node != "" {
		b = append(b, '_')
		b = append(b, id.Node...)
	}
	return string(b)
}

// Parse reads a connection id of either shape (see the package comment);
// false means a foreign id. It never panics and does not allocate, and
// whatever it accepts String writes back unchanged.
func Parse(s string) (ID, bool) {
	i := strings.IndexByte(s, '_')
	if i < 0 {
		return ID{}, false
	}
	ms, ok := parseMillis(s[:i])
	if !ok {
		return ID{}, false
	}
	rest := s[i+1:]
	j := strings.LastIndexByte(rest, '_')
	if j < 0 {
		return ID{}, false
	}
	mid, last := rest[:j], rest[j+1:]
	// Ours: mid is <ip>_<port>, last the node.
	if k := strings.LastIndexByte(mid, '_'); k > 0 && ValidNode(last) {
		if port, ok := parsePort(mid[k+1:]); ok {
			return ID{Millis: ms, IP: mid[:k], Port: port, Node: last}, true
		}
	}
	// Nacos's: mid is the IP, last the port.
	if mid != "" {
		if port, ok := parsePort(last); ok {
			return ID{Millis: ms, IP: mid, Port: port}, true
		}
	}
	return ID{}, false
}

// NodeOf returns the node id a connection id names: Parse(s).Node, so ""
// for Nacos's ids and foreign ones (connections no node of ours minted).
// It does not allocate; the table's node queries call it per connection.
func NodeOf(s string) string {
	id, _ := Parse(s)
	return id.Node
}

// ValidNode reports whether s is a node id as connection ids carry it: a
// replica id (a uint64) in decimal as strconv.FormatUint writes it.
func ValidNode(s string) bool {
	const maxUint64 = "18446744073709551615"
	if !canonicalDigits(s) || len(s) > len(maxUint64) {
		return false
	}
	return len(s) < len(maxUint64) || s <= maxUint64
}

// parsePort reads a port as strconv writes it: 0 to 65535.
func parsePort(s string) (uint16, bool) {
	if !canonicalDigits(s) || len(s) > 5 {
		return 0, false
	}
	v := 0
	for i := 0; i < len(s); i++ {
		v = v*10 + int(s[i]-'0')
	}
	if v > 65535 {
		return 0, false
	}
	return uint16(v), true
}

// parseMillis reads an int64 as strconv.FormatInt writes it.
func parseMillis(s string) (int64, bool) {
	neg := strings.HasPrefix(s, "-")
	digits := s
	if neg {
		digits = s[1:]
	}
	if !canonicalDigits(digits) || len(digits) > 19 || digits == "0" && neg {
		return 0, false
	}
	var v uint64 // 19 digits fit
	for i := 0; i < len(digits); i++ {
		v = v*10 + uint64(digits[i]-'0')
	}
	switch {
	case !neg && v <= math.MaxInt64:
		return int64(v), true
	case neg && v <= math.MaxInt64+1:
		return int64(-v), true // -(MaxInt64+1) wraps to MinInt64
	}
	return 0, false
}

// canonicalDigits reports whether s is a non-empty run of decimal digits
// without a leading zero (other than "0" itself).
func canonicalDigits(s string) bool {
	if s == "" || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
