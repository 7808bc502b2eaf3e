// Package deploy holds no code: its tests check the deployment files
// under deploy/ against the real binary.
package deploy

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacos-lockd/interop/client"
	"nacos-lockd/interop/procs"
	"nacos-lockd/protocol"
)

func TestMain(m *testing.M) {
	code := m.Run()
	procs.Cleanup()
	os.Exit(code)
}

// unitFile reads a systemd unit: section -> key -> values in order.
func unitFile(t *testing.T, path string) map[string]map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || line[0] == '#' || line[0] == ';':
		case line[0] == '[':
			section = strings.Trim(line, "[]")
			out[section] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s: bad line %q", path, line)
			}
			out[section][k] = append(out[section][k], v)
		}
	}
	return out
}

// TestSystemdUnit checks what the unit promises an operator (a dedicated
// user, a state directory, file limits, restart on failure), then runs the
// unit's own ExecStart command line, with the example properties file in
// place of /etc/nacos-lockd's and a temporary state directory, and checks
// that a SIGTERM stop with a client connected ends well within
// TimeoutStopSec. (systemd itself cannot run here: PID 1 is not systemd;
// `make systemd-check` verifies the unit with systemd-analyze.)
func TestSystemdUnit(t *testing.T) {
	u := unitFile(t, "systemd/nacos-lockd.service")
	svc := u["Service"]
	one := func(key string) string {
		t.Helper()
		if len(svc[key]) != 1 {
			t.Fatalf("[Service] %s: %q, want one value", key, svc[key])
		}
		return svc[key][0]
	}
	if user := one("User"); user == "" || user == "root" || one("Group") != user {
		t.Errorf("User=%q Group=%q: want a dedicated user", user, one("Group"))
	}
	sysusers, err := os.ReadFile("systemd/nacos-lockd.sysusers")
	if err != nil || !strings.Contains(string(sysusers), "\nu "+one("User")+" ") {
		t.Errorf("nacos-lockd.sysusers does not create user %q: %v\n%s", one("User"), err, sysusers)
	}
	if one("StateDirectory") != "nacos-lockd" || one("Restart") != "on-failure" {
		t.Errorf("StateDirectory=%q Restart=%q", one("StateDirectory"), one("Restart"))
	}
	if n, err := strconv.Atoi(one("LimitNOFILE")); err != nil || n < 10000+1024 {
		t.Errorf("LimitNOFILE=%q: want room for nacos.lock.max_connections (10000) and storage", one("LimitNOFILE"))
	}
	stopTimeout, err := time.ParseDuration(one("TimeoutStopSec"))
	if err != nil {
		t.Fatalf("TimeoutStopSec=%q: %v", one("TimeoutStopSec"), err)
	}
	if u["Install"]["WantedBy"][0] != "multi-user.target" {
		t.Errorf("WantedBy=%q", u["Install"]["WantedBy"])
	}

	exec_ := strings.Fields(one("ExecStart"))
	if exec_[0] != "/usr/local/bin/nacos-lockd" {
		t.Fatalf("ExecStart runs %q", exec_[0])
	}
	// The unit's arguments, with its paths moved into the test's own.
	state := filepath.Join(t.TempDir(), "state")
	args := []string{}
	for _, a := range exec_[1:] {
		switch {
		case a == "/etc/nacos-lockd/application.properties":
			a = "systemd/application.properties"
		case a == "/var/lib/nacos-lockd":
			a = state
		case strings.HasPrefix(a, "/"):
			t.Fatalf("ExecStart refers to %s, which this test does not map", a)
		}
		args = append(args, a)
	}
	if !strings.Contains(one("ExecStart"), "--data-dir /var/lib/"+one("StateDirectory")) {
		t.Errorf("ExecStart's --data-dir is not the StateDirectory: %s", one("ExecStart"))
	}
	port := procs.FreePorts(t, 1)[0]
	args = append(args, "--port", strconv.Itoa(port)) // the example's 8848 may be taken here
	cmd := exec.Command(procs.Binary(t, "nacos-lockd"), args...)
	logPath := filepath.Join(t.TempDir(), "stderr.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stderr = logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() { _ = cmd.Process.Kill() }()
	deadline := time.Now().Add(60 * time.Second)
	for !procs.LogHas(logPath, procs.ReadyLine) {
		if time.Now().After(deadline) {
			t.Fatalf("not ready:\n%s", procs.Tail(logPath, 30))
		}
		select {
		case err := <-done:
			t.Fatalf("exited (%v):\n%s", err, procs.Tail(logPath, 30))
		case <-time.After(50 * time.Millisecond):
		}
	}
	if !procs.LogHas(logPath, `"data_dir":"`+state+`"`) {
		t.Errorf("not started on the state directory:\n%s", procs.Tail(logPath, 30))
	}
	ctx, cancel := client.Timeout(10 * time.Second)
	defer cancel()
	c, err := client.Dial(ctx, fmt.Sprintf("127.0.0.1:%d", port+1000))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r, err := c.Lock(ctx, protocol.OpAcquire, client.Instance("systemd-unit", "NON_REENTRANT", "test", client.Ms(30000), nil))
	if err != nil || !r.Result {
		t.Fatalf("acquire: %+v %v", r, err)
	}

	start := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v\n%s", err, procs.Tail(logPath, 30))
		}
	case <-time.After(stopTimeout):
		t.Fatalf("still running %v after SIGTERM: systemd would SIGKILL it", stopTimeout)
	}
	// Graceful stop is bounded by the gateway's 5 s shutdown grace, plus
	// closing Raft and storage; the unit must leave a wide margin over it.
	if took := time.Since(start); took*3 > stopTimeout {
		t.Errorf("graceful stop took %v: TimeoutStopSec=%v leaves too little margin", took, stopTimeout)
	} else {
		t.Logf("graceful stop with a client connected: %v (TimeoutStopSec %v)", took, stopTimeout)
	}
	if !procs.LogHas(logPath, `"message":"nacos-lockd stopped"`) {
		t.Errorf("no clean stop logged:\n%s", procs.Tail(logPath, 30))
	}
}
