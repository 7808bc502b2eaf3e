package peers

import (
	"fmt"
	"net"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"nacos-lockd/internal/netports"
)

// A port whose Nacos cluster gRPC port (port+1001) is taken is not free:
// a Nacos peer started on it would fail to bind.
func TestPortWithItsNacosClusterPortTakenIsNotFree(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	taken := l.Addr().(*net.TCPAddr).Port
	for _, p := range []int{taken - 1001, taken - 1000, taken + 1000} {
		if neighboursFree(p) {
			t.Errorf("port %d counted free with %d taken", p, taken)
		}
	}
}

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
	lo := netports.EphemeralStart()
	for _, p := range ports {
		// Below the ephemeral range are the tests' own servers' ports.
		if p-1000 < lo {
			t.Errorf("port %d: its Raft port %d is below the ephemeral range (%d)", p, p-1000, lo)
		}
		for _, q := range []int{p - 1000, p, p + 1000} {
			if seen[q] {
				t.Fatalf("ports %v: port %d in two triples", ports, q)
			}
			seen[q] = true
		}
	}
}

func procState(t *testing.T, pid int) byte {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// pid (comm) state ...: the state follows the last ')'.
	s := string(b)
	return s[strings.LastIndexByte(s, ')')+2]
}

// A paused server stops running (state T) until resumed, and Stop ends a
// paused one as it ends a running one.
func TestPauseResumeStop(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	p, err := Start("sleeper", t.TempDir(), "sleep", "60")
	if err != nil {
		t.Fatal(err)
	}
	defer p.Stop(time.Second)
	waitState := func(want func(byte) bool, what string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for st := procState(t, p.PID()); !want(st); st = procState(t, p.PID()) {
			if time.Now().After(deadline) {
				t.Fatalf("state %c, want %s", st, what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	p.Pause()
	waitState(func(s byte) bool { return s == 'T' }, "stopped (T)")
	p.Resume()
	waitState(func(s byte) bool { return s != 'T' }, "running again")
	p.Pause()
	waitState(func(s byte) bool { return s == 'T' }, "stopped (T)")
	if d := p.Stop(10 * time.Second); d > 5*time.Second || !p.Exited() {
		t.Fatalf("Stop of a paused process took %v (exited %v): the SIGTERM waited for a SIGKILL", d, p.Exited())
	}
}
