// Package netports says where the kernel's ephemeral port range starts,
// the line between the ports the tests' servers pick (below it) and those
// the bench's servers and every outgoing connection get (inside it).
package netports

import (
	"fmt"
	"os"
)

// DefaultEphemeralStart is Linux's default first ephemeral port, used when
// the range cannot be read.
const DefaultEphemeralStart = 32768

// EphemeralStart is the first port of the kernel's ephemeral range
// (net.ipv4.ip_local_port_range).
func EphemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return DefaultEphemeralStart
	}
	var lo, hi int
	if n, _ := fmt.Sscanf(string(b), "%d %d", &lo, &hi); n != 2 || lo < 1024 || hi < lo {
		return DefaultEphemeralStart
	}
	return lo
}
