package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
)

func TestSplitArgs(t *testing.T) {
	for _, c := range []struct {
		args         []string
		global, rest []string
		command      string
	}{
		{[]string{"--json", "ls"}, []string{"--json"}, nil, "ls"},
		{[]string{"ls", "--json", "--prefix", "a/"}, []string{"--json"}, []string{"--prefix", "a/"}, "ls"},
		{[]string{"hold", "--lease", "3000", "job1", "--", "./job.sh", "--json"}, nil, []string{"--lease", "3000", "job1", "--", "./job.sh", "--json"}, "hold"},
		{[]string{"--lease", "3000", "hold", "job1", "--server", "h:1", "--", "x"}, []string{"--server", "h:1"}, []string{"job1", "--lease", "3000", "--", "x"}, "hold"},
		// A value flag's value is never the command, a boolean flag's next word is.
		{[]string{"--owner", "try", "try", "k"}, nil, []string{"k", "--owner", "try"}, "try"},
		{[]string{"--stale", "ls"}, nil, []string{"--stale"}, "ls"},
		{[]string{"--owner=x", "try", "k", "--json=false"}, []string{"--json=false"}, []string{"k", "--owner=x"}, "try"},
		{[]string{"--server=h:1", "--timeout", "2s", "cluster", "add", "10.0.0.4:8848"}, []string{"--server=h:1", "--timeout", "2s"}, []string{"add", "10.0.0.4:8848"}, "cluster"},
		{[]string{"--json"}, []string{"--json"}, nil, ""},
		{[]string{"get", "REENTRANT", "--", "-odd-key"}, nil, []string{"REENTRANT", "--", "-odd-key"}, "get"},
	} {
		global, command, rest := splitArgs(c.args)
		if !slices.Equal(global, c.global) || command != c.command || !slices.Equal(rest, c.rest) {
			t.Errorf("%q: global %q, command %q, rest %q; want %q %q %q", c.args, global, command, rest, c.global, c.command, c.rest)
		}
	}
}

// TestBoolFlagsKnown: splitArgs must know every boolean flag of every
// command (see commandBoolFlags); read them from each command's -h.
func TestBoolFlagsKnown(t *testing.T) {
	boolLine := regexp.MustCompile(`(?m)^  -([a-z-]+)$`) // flag.PrintDefaults: a bool flag has no type
	commands := []string{"cluster"}
	for c := range lockCommands {
		commands = append(commands, c)
	}
	for c := range adminCommands {
		commands = append(commands, c)
	}
	sort.Strings(commands)
	seen := map[string]bool{}
	for _, cmd := range commands {
		var errOut bytes.Buffer
		_ = run(context.Background(), []string{cmd, "-h"}, strings.NewReader(""), &bytes.Buffer{}, &errOut)
		if !strings.Contains(errOut.String(), "Usage of "+cmd) {
			t.Errorf("%s -h printed no flags:\n%s", cmd, errOut.String())
		}
		for _, m := range boolLine.FindAllStringSubmatch(errOut.String(), -1) {
			seen[m[1]] = true
			if !commandBoolFlags[m[1]] && !globalFlags[m[1]] {
				t.Errorf("%s: boolean flag --%s is not in commandBoolFlags", cmd, m[1])
			}
		}
	}
	if !seen["stale"] || !seen["password-stdin"] {
		t.Errorf("the known boolean flags were not found in -h output: %v", seen)
	}
}

// TestFlagsAnywhere runs the real CLI against a real server with flags
// before and after the command and the key, and the server from
// NACOS_LOCKCTL_SERVER.
func TestFlagsAnywhere(t *testing.T) {
	server := startServer(t)
	ctx := context.Background()
	ctl := func(env []string, args ...string) (string, string, int) {
		t.Helper()
		cmd := exec.CommandContext(ctx, ctlBinary, args...)
		cmd.Env = append(os.Environ(), env...)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		return o.String(), e.String(), exitOf(err)
	}
	env := []string{"NACOS_LOCKCTL_SERVER=" + server}

	// hold with its flags before the key, before the command, and a --json
	// after "--" that belongs to the held command.
	for _, args := range [][]string{
		{"hold", "--lease", "3000", "job1", "--", "sh", "-c", `echo "held $NACOS_LOCK_KEY" "$@"`, "sh", "--json"},
		{"--lease", "3000", "hold", "job1", "--", "sh", "-c", `echo "held $NACOS_LOCK_KEY" "$@"`, "sh", "--json"},
		{"--lease=3000", "hold", "--type", "REENTRANT", "job1", "--", "sh", "-c", `echo "held $NACOS_LOCK_KEY" "$@"`, "sh", "--json"},
	} {
		out, errOut, code := ctl(env, args...)
		if code != 0 || out != "held job1 --json\n" {
			t.Fatalf("%q: exit %d, stdout %q\n%s", args, code, out, errOut)
		}
	}

	// --json before the command, after it, after the key.
	for _, args := range [][]string{
		{"--json", "try", "k1"}, {"try", "--json", "k1"}, {"try", "k1", "--json"}, {"try", "k1", "--json", "--lease", "2000"},
	} {
		out, errOut, code := ctl(env, args...)
		var r struct{ Result bool }
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil || !r.Result {
			t.Fatalf("%q: exit %d, stdout %q\n%s", args, code, out, errOut)
		}
		if !strings.Contains(errOut, "k1 is released as nacos-lockctl exits") {
			t.Fatalf("%q: try does not say it releases on exit: %q", args, errOut)
		}
	}
	out, errOut, code := ctl(env, "ls", "--json", "--limit", "5")
	if code != 0 || !strings.HasPrefix(out, `{"locks":[]`) {
		t.Fatalf("ls --json: exit %d %q %s", code, out, errOut)
	}
	out, errOut, code = ctl(env, "cluster", "list", "--json")
	if code != 0 || !strings.Contains(out, `"members":[`) {
		t.Fatalf("cluster list --json: exit %d %q %s", code, out, errOut)
	}

	// --server beats the environment; the environment beats the default.
	_, errOut, code = ctl([]string{"NACOS_LOCKCTL_SERVER=127.0.0.1:1"}, "ls", "--server", server)
	if code != 0 {
		t.Fatalf("--server after the command over NACOS_LOCKCTL_SERVER: exit %d %s", code, errOut)
	}
	_, errOut, code = ctl([]string{"NACOS_LOCKCTL_SERVER=127.0.0.1:1"}, "ls")
	if code != 1 || !strings.Contains(errOut, "127.0.0.1:1") {
		t.Fatalf("NACOS_LOCKCTL_SERVER not used: exit %d %s", code, errOut)
	}

	// Mistakes still fail, with the command named.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"try"}, "try: a lock key is required"},
		{[]string{"try", "a", "b"}, "try: unexpected arguments [b]"},
		{[]string{"ls", "extra"}, "ls: unexpected arguments [extra]"},
		{[]string{"get", "REENTRANT"}, "get: give the lock type and the key"},
		{[]string{"try", "k", "--lease"}, "flag needs an argument: -lease"},
		{[]string{"--json"}, "unknown command"},
	} {
		_, errOut, code := ctl(env, c.args...)
		if code != 1 || !strings.Contains(errOut, c.want) {
			t.Errorf("%q: exit %d, want 1 and %q in:\n%s", c.args, code, c.want, errOut)
		}
	}
	if _, errOut, code := ctl(env, "-h"); code != 0 || !strings.Contains(errOut, "Flags may come before or after the command") {
		t.Errorf("-h: exit %d\n%s", code, errOut)
	}
}
