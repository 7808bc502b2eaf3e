package main

import (
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"nacos-lockd/interop/procs"
)

// The real binary's first start on a data dir made by an import or a
// restore seals the installed table and then serves; so does the start
// after that. The seal once asked dragonboat for a snapshot without a
// deadline, which it refuses: every such first start exited ("seal the
// imported table"), and no test started a process there.
func TestFirstStartAfterImportAndRestoreServes(t *testing.T) {
	bin := procs.Binary(t, "nacos-lockd")
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(bin, args...).CombinedOutput(); err != nil {
			t.Fatalf("nacos-lockd %v: %v\n%s", args, err, out)
		}
	}
	serveTwice := func(name, dataDir string, extra ...string) {
		t.Helper()
		port := freeMainPort(t)
		p := startProcess(t, port, dataDir, extra...)
		if !p.Logged("sealed into a snapshot") {
			t.Fatalf("%s: the first start did not seal the installed table; log:\n%s", name, procs.Tail(p.LogPath, 20))
		}
		connect(t, port)
		p.Term(20 * time.Second)
		if p.ExitErr() != nil {
			t.Fatalf("%s: exit after SIGTERM: %v", name, p.ExitErr())
		}
		again := startProcess(t, port, dataDir, extra...) // the Raft log is bound to its address
		again.Term(20 * time.Second)
		if again.ExitErr() != nil {
			t.Fatalf("%s: second start: %v", name, again.ExitErr())
		}
	}

	base := t.TempDir()
	imported := filepath.Join(base, "imported")
	serveTwice("--import-nacos", imported, "--import-nacos", nacosFixture("gen2-hashmap"))

	out := filepath.Join(base, "export")
	run("snapshot", "export", "--data-dir", imported, "--out", out)
	restored := filepath.Join(base, "restored")
	run("snapshot", "restore", "--in", out, "--data-dir", restored)
	serveTwice("snapshot restore", restored)
}
