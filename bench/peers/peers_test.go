package peers

import "testing"

// FreePorts' triples (Raft, main, SDK gRPC) never overlap: three nodes of
// one cluster on loopback each get their own three ports.
func TestFreePortsDoNotOverlap(t *testing.T) {
	ports, err := FreePorts(3)
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 3 {
		t.Fatalf("got %v", ports)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		for _, q := range []int{p - 1000, p, p + 1000} {
			if seen[q] {
				t.Fatalf("ports %v: port %d in two triples", ports, q)
			}
			seen[q] = true
		}
	}
}
