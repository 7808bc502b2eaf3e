package main

import (
	"bytes"
	"debug/elf"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"nacos-lockd/interop/procs"
)

// hookSymbols are functions and variables that exist only with -tags
// testhooks: the storage failpoint, the gateway's settable clock and the
// --test-hooks file reader. Matched as suffixes, since package main's
// symbols are "main." in a binary and the import path in a test binary.
var hookSymbols = []string{
	"nacos-lockd/storage.testFailpoint",
	"nacos-lockd/storage.SetTestFailpoint",
	"nacos-lockd/gateway.(*Server).SetTestClock",
	".(*testHooks).apply",
}

// elfSymbols returns the names in path's symbol table that end in one of
// want.
func elfSymbols(t *testing.T, path string, want []string) map[string]bool {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	syms, err := f.Symbols()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	found := map[string]bool{}
	for _, s := range syms {
		for _, w := range want {
			if strings.HasSuffix(s.Name, w) {
				found[w] = true
			}
		}
	}
	return found
}

// TestReleaseBuildHasNoTestHooks: a plain `go build` of nacos-lockd, the
// build make build and make release do (they add only -trimpath and
// ldflags), has none of the chaos suite's test hooks compiled in, leaves
// --test-hooks out of --help and refuses it. The binary is the one procs
// builds for the process tests: no build tags. With -tags testhooks the
// test also builds the chaos suite's binary and checks that it has them.
func TestReleaseBuildHasNoTestHooks(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := procs.Binary(t, "nacos-lockd")
	if found := elfSymbols(t, bin, hookSymbols); len(found) > 0 {
		t.Errorf("a build without -tags testhooks has test hook symbols: %v", found)
	}
	help, _ := exec.Command(bin, "--help").CombinedOutput()
	if !strings.Contains(string(help), "--data-dir") {
		t.Fatalf("--help printed no flags:\n%s", help)
	}
	if strings.Contains(string(help), "test-hooks") {
		t.Errorf("--help of a release build mentions test-hooks:\n%s", help)
	}
	out, err := exec.Command(bin, "--test-hooks", t.TempDir()+"/hooks", "--data-dir", t.TempDir()).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || !strings.Contains(string(out), "built without test hooks") {
		t.Errorf("--test-hooks on a release build: %v, want an exit with %q; output:\n%s", err, "built without test hooks", out)
	}
	if !testHooksBuilt {
		return // make test-go runs this with -tags testhooks, and so the check below
	}
	// The symbols above must be real names, or their absence proves
	// nothing; and the chaos suite finds the hooks by --help listing
	// --test-hooks. The build is the chaos suite's (interop/chaos), so its
	// packages come from the build cache there.
	hooked := filepath.Join(t.TempDir(), "nacos-lockd-testhooks")
	if out, err := exec.Command("go", "build", "-tags", "testhooks", "-o", hooked, "nacos-lockd/cmd/nacos-lockd").CombinedOutput(); err != nil {
		t.Fatalf("go build -tags testhooks: %v\n%s", err, out)
	}
	found := elfSymbols(t, hooked, hookSymbols)
	for _, s := range hookSymbols {
		if !found[s] {
			t.Errorf("the build with -tags testhooks has no symbol %q: update hookSymbols", s)
		}
	}
	help, _ = exec.Command(hooked, "--help").CombinedOutput()
	if !strings.Contains(string(help), "--test-hooks") {
		t.Errorf("--help of the build with -tags testhooks lacks --test-hooks:\n%s", help)
	}
}

// --test-hooks parses in a testhooks build and is refused, and left out
// of the usage, in a release build.
func TestTestHooksFlag(t *testing.T) {
	var usage bytes.Buffer
	if _, err := parseConfig([]string{"--help"}, noEnv, &usage); !errors.Is(err, errHelp) {
		t.Fatalf("--help: %v", err)
	}
	cfg, err := parseConfig([]string{"--test-hooks", "/some/file"}, noEnv, &bytes.Buffer{})
	if testHooksBuilt {
		if err != nil || cfg.testHooks != "/some/file" {
			t.Fatalf("--test-hooks with the hooks built: %v %q", err, cfg.testHooks)
		}
		if !strings.Contains(usage.String(), "--test-hooks") {
			t.Errorf("usage of a testhooks build lacks --test-hooks:\n%s", &usage)
		}
		return
	}
	if !errors.Is(err, errNoTestHooks) {
		t.Fatalf("--test-hooks in a release build: %v, want %v", err, errNoTestHooks)
	}
	if strings.Contains(usage.String(), "test-hooks") {
		t.Errorf("usage of a release build mentions test-hooks:\n%s", &usage)
	}
}
