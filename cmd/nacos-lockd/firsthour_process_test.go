package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacos-lockd/internal/syncbuf"
	"nacos-lockd/interop/procs"
)

// runUntilReady starts the real binary with stdout and stderr captured
// apart, waits for the ready line, stops it with SIGTERM and returns both.
func runUntilReady(t *testing.T, args ...string) (stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(procs.Binary(t, "nacos-lockd"), args...)
	var out, errOut syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.After(60 * time.Second)
	for !strings.Contains(errOut.String(), procs.ReadyLine) || strings.Count(out.String(), "\n") < 2 {
		select {
		case err := <-done:
			t.Fatalf("exited before ready (%v):\n%s", err, errOut.String())
		case <-deadline:
			_ = cmd.Process.Kill()
			t.Fatalf("not ready in 60 s:\n%s", errOut.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, errOut.String())
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("no exit within 30 s of SIGTERM")
	}
	return out.String(), errOut.String()
}

// dragonboatNoise are the start-up messages a new user read as alarms
// (issue 15): routine, so below info now.
var dragonboatNoise = []string{"mutual TLS disabled", "StaleRead called", "LocalTick", "PreVote"}

// TestStartBannerAndQuietLog: a single node's start shows a two-line
// plain banner on stdout, only JSON on stderr, and none of dragonboat's
// routine messages at info; at debug they are still there. By default a
// new single node runs the single-node engine, and the banner says so;
// with --raft-engine raft it names its Raft address.
func TestStartBannerAndQuietLog(t *testing.T) {
	port := freeMainPort(t)
	soloDir := filepath.Join(t.TempDir(), "data")
	out, _ := runUntilReady(t, "--port", strconv.Itoa(port), "--data-dir", soloDir)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want1 := fmt.Sprintf("nacos-lockd dev ready: single-node node 127.0.0.1:%d, replica 1, leader; data in %s", port, soloDir)
	want2 := fmt.Sprintf("clients: serverAddr=127.0.0.1:%d (SDK gRPC port %d); admin API, /readyz and /metrics: http://127.0.0.1:%d; single-node engine (no Raft; --raft-engine raft on a new data dir for a node that may grow into a cluster)",
		port, port+1000, port)
	if len(lines) != 2 || lines[0] != want1 || lines[1] != want2 {
		t.Fatalf("banner:\n%s\nwant:\n%s\n%s", out, want1, want2)
	}

	dir := filepath.Join(t.TempDir(), "data")
	out, errOut := runUntilReady(t, "--port", strconv.Itoa(port), "--data-dir", dir, "--raft-engine", "raft")
	lines = strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	want1 = fmt.Sprintf("nacos-lockd dev ready: single-node node 127.0.0.1:%d, replica 1, leader; data in %s", port, dir)
	want2 = fmt.Sprintf("clients: serverAddr=127.0.0.1:%d (SDK gRPC port %d); admin API, /readyz and /metrics: http://127.0.0.1:%d; Raft 127.0.0.1:%d",
		port, port+1000, port, port-1000)
	if len(lines) != 2 || lines[0] != want1 || lines[1] != want2 {
		t.Fatalf("banner:\n%s\nwant:\n%s\n%s", out, want1, want2)
	}
	sc := bufio.NewScanner(strings.NewReader(errOut))
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			t.Errorf("stderr line is not JSON: %s", sc.Text())
		}
		for _, s := range dragonboatNoise {
			if strings.Contains(sc.Text(), s) {
				t.Errorf("routine dragonboat message at info: %s", sc.Text())
			}
		}
	}

	// The mapping lowers them; it does not lose them. (The data dir keeps
	// the Raft engine it was made with.)
	_, debugOut := runUntilReady(t, "--port", strconv.Itoa(port), "--data-dir", dir, "--log-level", "debug")
	for _, s := range []string{"mutual TLS disabled", "StaleRead called"} {
		if !strings.Contains(debugOut, s) {
			t.Errorf("%q not logged at debug:\n%s", s, debugOut)
		}
	}
	if !strings.Contains(debugOut, `"level":"debug","component":"raft","pkg":"config","time"`) {
		t.Errorf("dragonboat config note not at debug:\n%s", debugOut)
	}
}

// TestPortInUse: when any of the three ports is taken, the start fails at
// once with the port, what it derives from and what changes it.
func TestPortInUse(t *testing.T) {
	port := freeMainPort(t)
	for _, c := range []struct {
		name string
		addr string
		want string
		args []string
	}{
		{"main", fmt.Sprintf(":%d", port), fmt.Sprintf("main port %d (HTTP admin API) is already in use", port), nil},
		{"sdk", fmt.Sprintf(":%d", port+1000), fmt.Sprintf("SDK gRPC port %d (main port %d + 1000) is already in use", port+1000, port), nil},
		{"raft", fmt.Sprintf("127.0.0.1:%d", port-1000), fmt.Sprintf("Raft port %d (main port %d - 1000) is already in use on 127.0.0.1:%d", port-1000, port, port-1000),
			[]string{"--raft-engine", "raft"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, err := net.Listen("tcp", c.addr)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			dir := filepath.Join(t.TempDir(), "data")
			cmd := exec.Command(procs.Binary(t, "nacos-lockd"), append([]string{"--port", strconv.Itoa(port), "--data-dir", dir}, c.args...)...)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("started with the %s port taken:\n%s", c.name, out)
			}
			if !strings.Contains(string(out), c.want) || !strings.Contains(string(out), "--port N (NACOS_LOCKD_PORT, server.port in --config") {
				t.Fatalf("error does not name the port and the flag:\n%s", out)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("took %v to fail", d)
			}
		})
	}
	// A node on the single-node engine listens on no Raft port.
	t.Run("raft port on the single-node engine", func(t *testing.T) {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port-1000))
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		runUntilReady(t, "--port", strconv.Itoa(port), "--data-dir", filepath.Join(t.TempDir(), "data"))
	})
}
