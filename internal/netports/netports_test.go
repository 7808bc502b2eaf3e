package netports

import (
	"net"
	"testing"
)

// TestEphemeralStartIsWhereTheKernelPicks checks the range against the
// ports the kernel hands out for port 0.
func TestEphemeralStartIsWhereTheKernelPicks(t *testing.T) {
	lo := EphemeralStart()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p < lo {
			t.Fatalf("the kernel gave port %d, below the ephemeral start %d", p, lo)
		}
	}
}
