//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"nacos-lockd/interop/procs"
)

// The Java client in the runs: interop/java's ChaosGen1ClientMain, the
// unmodified nacos-client (the newest version the interop reactor pins)
// taking and releasing NACOS_LOCK locks through the Gen 1 LockService API,
// one connection per worker thread. It shares lock g-0 with the Go clients
// and has g-1 to itself, and writes its history in the same format with
// "blind" replies (the Gen 1 API returns only a boolean).
//
// CHAOS_JAVA: "require" (CI) fails the run when it cannot start; "off"
// leaves it out; unset uses it when java and mvn are installed.

const javaModule = "interop/java/versions/v3.2.1"

type javaClient struct {
	proc   int
	cmd    *exec.Cmd
	exited chan struct{}
}

// startJavaClient builds the client's classpath with Maven and starts it;
// nil (logged) when Java is off or unavailable and not required.
func startJavaClient(t *testing.T, out string, nodes []string, proc, workers int, seed uint64) *javaClient {
	t.Helper()
	mode := os.Getenv("CHAOS_JAVA")
	if mode == "off" {
		t.Log("Java client: off (CHAOS_JAVA=off)")
		return nil
	}
	fail := func(format string, args ...any) *javaClient {
		t.Helper()
		if mode == "require" {
			t.Fatalf("Java client: "+format, args...)
		}
		t.Logf("Java client left out: "+format, args...)
		return nil
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return fail("no java: %v", err)
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return fail("no mvn: %v", err)
	}
	cp, err := procs.JavaTestClasspath(context.Background(), filepath.Join("../..", javaModule), out)
	if err != nil {
		return fail("%v", err)
	}
	logf, err := os.Create(filepath.Join(out, fmt.Sprintf("client-p%d-java.log", proc)))
	if err != nil {
		return fail("%v", err)
	}
	cmd := exec.Command(java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-DJM.LOG.PATH="+filepath.Join(out, "java-client-logs"), "-cp", cp, "nacoslockd.interop.support.ChaosGen1ClientMain",
		strings.Join(nodes, ","), filepath.Join(out, fmt.Sprintf("history-p%d.jsonl", proc)), fmt.Sprint(proc), fmt.Sprint(workers),
		fmt.Sprint(seed), "500", "2500", "g-0,g-1")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fail("start: %v", err)
	}
	j := &javaClient{proc: proc, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(j.exited)
	}()
	t.Cleanup(func() { j.kill() })
	t.Logf("Java client: process p%d, %d workers, nacos-client from %s", proc, workers, javaModule)
	return j
}

// stop ends the client with SIGTERM (its workers end their sessions and
// shut their LockServices down), and SIGKILL after 20 s.
func (j *javaClient) stop() {
	if j == nil {
		return
	}
	_ = j.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-j.exited:
	case <-time.After(20 * time.Second):
		j.kill()
	}
}

func (j *javaClient) kill() {
	if j == nil {
		return
	}
	_ = j.cmd.Process.Kill()
	<-j.exited
}
