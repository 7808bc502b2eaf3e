//go:build chaos

package chaos

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// network places the nodes. With root and iproute2, each node runs in its
// own network namespace joined to a bridge by a veth pair, so traffic
// between two nodes can be cut in either direction with a blackhole route
// in the sender's namespace; clients, the harness and the register stay in
// the root namespace and always reach every node. Without namespaces the
// nodes share loopback and the partition faults are skipped.
type network interface {
	// addr is node i's IP and main port (SDK gRPC = main + 1000, Raft = main - 1000).
	addr(i int) (string, int)
	// command runs a program as node i.
	command(i int, bin string, args ...string) *exec.Cmd
	// cut drops every packet node from sends to node to; cutClients drops
	// everything between node i and the clients; heal undoes all cuts.
	cut(from, to int) error
	cutClients(i int) error
	heal() error
	canPartition() bool
	close()
	describe() string
}

// newNetwork picks namespaces when they work here, unless CHAOS_NET=loopback.
func newNetwork(t *testing.T, nodes int) network {
	t.Helper()
	if os.Getenv("CHAOS_NET") != "loopback" {
		n, err := newNetns(nodes)
		if err == nil {
			return n
		}
		if os.Getenv("CHAOS_NET") == "netns" {
			t.Fatalf("network namespaces: %v", err)
		}
		t.Logf("network namespaces unavailable (%v): nodes share loopback, partitions are skipped", err)
	}
	return newLoopback(t, nodes)
}

type netns struct {
	prefix string
	subnet string // "10.213.X."
	nodes  int
	mu     sync.Mutex
	cuts   map[[2]int]bool
	client map[int]bool // nodes cut off from the clients
}

func ipcmd(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

func newNetns(nodes int) (*netns, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("not root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return nil, err
	}
	id := rand.IntN(1 << 20)
	n := &netns{prefix: fmt.Sprintf("cx%05x", id), subnet: fmt.Sprintf("10.%d.%d.", 200+rand.IntN(50), rand.IntN(250)), nodes: nodes,
		cuts: map[[2]int]bool{}, client: map[int]bool{}}
	br := n.prefix + "br"
	steps := [][]string{
		{"link", "add", br, "type", "bridge"},
		{"addr", "add", n.subnet + "254/24", "dev", br},
		{"link", "set", br, "up"},
	}
	for _, s := range steps {
		if err := ipcmd(s...); err != nil {
			n.close()
			return nil, err
		}
	}
	for i := range nodes {
		ns, veth := n.ns(i), fmt.Sprintf("%sv%d", n.prefix, i)
		for _, s := range [][]string{
			{"netns", "add", ns},
			{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
			{"link", "set", veth, "master", br, "up"},
			{"-n", ns, "addr", "add", fmt.Sprintf("%s%d/24", n.subnet, i+1), "dev", "eth0"},
			{"-n", ns, "link", "set", "eth0", "up"},
			{"-n", ns, "link", "set", "lo", "up"},
		} {
			if err := ipcmd(s...); err != nil {
				n.close()
				return nil, err
			}
		}
	}
	return n, nil
}

func (n *netns) ns(i int) string { return fmt.Sprintf("%sn%d", n.prefix, i) }

func (n *netns) addr(i int) (string, int) { return fmt.Sprintf("%s%d", n.subnet, i+1), 8848 }

func (n *netns) command(i int, bin string, args ...string) *exec.Cmd {
	// ip netns exec execs the program in place: the pid is the node's.
	return exec.Command("ip", append([]string{"netns", "exec", n.ns(i), bin}, args...)...)
}

func (n *netns) cut(from, to int) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cuts[[2]int{from, to}] {
		return nil
	}
	ip, _ := n.addr(to)
	if err := ipcmd("-n", n.ns(from), "route", "add", "blackhole", ip+"/32"); err != nil {
		return err
	}
	n.cuts[[2]int{from, to}] = true
	return nil
}

// cutClients blackholes node i's route to the bridge address (where the
// clients and the harness live) and the root namespace's route to node i.
func (n *netns) cutClients(i int) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.client[i] {
		return nil
	}
	ip, _ := n.addr(i)
	if err := ipcmd("-n", n.ns(i), "route", "add", "blackhole", n.subnet+"254/32"); err != nil {
		return err
	}
	n.client[i] = true
	return ipcmd("route", "add", "blackhole", ip+"/32")
}

func (n *netns) heal() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	var first error
	for i := range n.client {
		ip, _ := n.addr(i)
		for _, args := range [][]string{{"-n", n.ns(i), "route", "del", "blackhole", n.subnet + "254/32"}, {"route", "del", "blackhole", ip + "/32"}} {
			if err := ipcmd(args...); err != nil && first == nil {
				first = err
			}
		}
		delete(n.client, i)
	}
	for c := range n.cuts {
		ip, _ := n.addr(c[1])
		if err := ipcmd("-n", n.ns(c[0]), "route", "del", "blackhole", ip+"/32"); err != nil && first == nil {
			first = err
		}
		delete(n.cuts, c)
	}
	return first
}

func (n *netns) canPartition() bool { return true }

func (n *netns) close() {
	_ = n.heal() // the root namespace's routes outlive the namespaces
	for i := range n.nodes {
		_ = ipcmd("netns", "del", n.ns(i)) // takes its end of the veth pair along
	}
	_ = ipcmd("link", "del", n.prefix+"br")
}

func (n *netns) describe() string {
	return fmt.Sprintf("network namespaces %s*, bridge %sbr, nodes at %s1..%d", n.prefix, n.prefix, n.subnet, n.nodes)
}

// loopback runs every node on 127.0.0.1 with its own ports.
type loopback struct{ ports []int }

func newLoopback(t *testing.T, nodes int) *loopback {
	return &loopback{ports: freePorts(t, nodes)}
}

func (l *loopback) addr(i int) (string, int) { return "127.0.0.1", l.ports[i] }
func (l *loopback) command(_ int, bin string, args ...string) *exec.Cmd {
	return exec.Command(bin, args...)
}
func (l *loopback) cut(int, int) error   { return fmt.Errorf("partitions need network namespaces") }
func (l *loopback) cutClients(int) error { return fmt.Errorf("partitions need network namespaces") }
func (l *loopback) heal() error          { return nil }
func (l *loopback) canPartition() bool   { return false }
func (l *loopback) close()               {}
func (l *loopback) describe() string     { return fmt.Sprintf("loopback, main ports %v", l.ports) }

// freePorts finds n main ports P with P-1000, P and P+1000 free.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var out []int
	used := map[int]bool{}
	for tries := 0; len(out) < n && tries < 1000; tries++ {
		p := 21000 + rand.IntN(40000)
		ok := true
		for _, q := range []int{p - 1000, p, p + 1000} {
			if used[q] {
				ok = false
				break
			}
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", q))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			for _, q := range []int{p - 1000, p, p + 1000} {
				used[q] = true
			}
			out = append(out, p)
		}
	}
	if len(out) < n {
		t.Fatal("not enough free ports")
	}
	return out
}
