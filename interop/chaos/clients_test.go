//go:build chaos

package chaos

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// clientSet runs the client processes, one per slot. A killed client is
// replaced by a new process (a new process number, new sessions).
type clientSet struct {
	t     *testing.T
	out   string
	base  clientConfig
	mu    sync.Mutex
	slots []*clientProc
	next  int
}

type clientProc struct {
	proc   int
	cmd    *exec.Cmd
	exited chan struct{}
	paused bool
}

func (p *clientProc) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func newClientSet(t *testing.T, out string, base clientConfig, slots int) *clientSet {
	cs := &clientSet{t: t, out: out, base: base, slots: make([]*clientProc, slots)}
	t.Cleanup(func() {
		for _, p := range cs.slots {
			if p != nil && p.running() {
				_ = p.cmd.Process.Signal(syscall.SIGCONT)
				_ = p.cmd.Process.Kill()
				<-p.exited
			}
		}
	})
	for i := range slots {
		cs.start(i)
	}
	return cs
}

func (cs *clientSet) start(slot int) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if p := cs.slots[slot]; p != nil && p.running() {
		return
	}
	cs.next++
	cfg := cs.base
	cfg.Proc = cs.next
	cfg.History = filepath.Join(cs.out, fmt.Sprintf("history-p%d.jsonl", cfg.Proc))
	raw, _ := json.Marshal(cfg)
	exe, err := os.Executable()
	if err != nil {
		cs.t.Errorf("client: %v", err)
		return
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), clientEnv+"="+string(raw))
	logf, err := os.Create(filepath.Join(cs.out, fmt.Sprintf("client-p%d.log", cfg.Proc)))
	if err != nil {
		cs.t.Errorf("client: %v", err)
		return
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		cs.t.Errorf("client: %v", err)
		return
	}
	p := &clientProc{proc: cfg.Proc, cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(p.exited)
	}()
	cs.slots[slot] = p
}

func (cs *clientSet) signal(slot int, sig syscall.Signal) int {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	p := cs.slots[slot]
	if p == nil || !p.running() {
		return 0
	}
	_ = p.cmd.Process.Signal(sig)
	switch sig {
	case syscall.SIGSTOP:
		p.paused = true
	case syscall.SIGCONT:
		p.paused = false
	}
	return p.proc
}

func (cs *clientSet) kill(slot int) int {
	proc := cs.signal(slot, syscall.SIGKILL)
	cs.mu.Lock()
	p := cs.slots[slot]
	cs.mu.Unlock()
	if p != nil {
		<-p.exited
	}
	return proc
}

// stop ends every client: SIGCONT, SIGTERM, and SIGKILL after a grace.
func (cs *clientSet) stop() {
	cs.mu.Lock()
	procs := append([]*clientProc(nil), cs.slots...)
	cs.mu.Unlock()
	for _, p := range procs {
		if p != nil && p.running() {
			_ = p.cmd.Process.Signal(syscall.SIGCONT)
			_ = p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	deadline := time.NewTimer(15 * time.Second)
	defer deadline.Stop()
	timedOut := false
	for _, p := range procs {
		if p == nil {
			continue
		}
		if !timedOut {
			select {
			case <-p.exited:
				continue
			case <-deadline.C:
				timedOut = true
			}
		}
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}
