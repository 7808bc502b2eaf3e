package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/compat"
	"nacos-lockd/internal/syncbuf"
)

// fakeNames is a switchable resolver: a table of names, changed by tests
// while a watch runs.
type fakeNames struct {
	mu    sync.Mutex
	table map[string][]string
	asked map[string]int
}

func (f *fakeNames) lookups(name string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.asked[name]
}

func (f *fakeNames) set(name string, addrs ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.table == nil {
		f.table = map[string][]string{}
	}
	if len(addrs) == 0 {
		delete(f.table, name)
		return
	}
	f.table[name] = addrs
}

func (f *fakeNames) lookup(_ context.Context, host string) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.asked == nil {
		f.asked = map[string]int{}
	}
	f.asked[host]++
	if a, ok := f.table[host]; ok {
		return append([]string(nil), a...), nil
	}
	return nil, fmt.Errorf("lookup %s: no such host", host)
}

// withHost switches sysHost for one test; unset fields resolve nothing,
// have no host name and no addresses.
func withHost(t *testing.T, h hostEnv) {
	t.Helper()
	if h.lookup == nil {
		h.lookup = (&fakeNames{}).lookup
	}
	if h.hostname == nil {
		h.hostname = func() (string, error) { return "", errors.New("no host name") }
	}
	if h.localAddrs == nil {
		h.localAddrs = func() []string { return nil }
	}
	saved := sysHost
	sysHost = h
	t.Cleanup(func() { sysHost = saved })
}

func members(t *testing.T, conf string) []compat.Member {
	t.Helper()
	ms, err := compat.ParseClusterConf(strings.NewReader(conf))
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func TestFindSelf(t *testing.T) {
	const ns = ".lockd-headless.prod.svc.cluster.local"
	pods := members(t, "lockd-0"+ns+":8848\nlockd-1"+ns+":8848\nlockd-2"+ns+":8848\n")
	names := &fakeNames{}
	names.set("lockd-0"+ns, "10.1.0.10")
	names.set("lockd-1"+ns, "10.1.0.11") // lockd-2 does not resolve yet
	names.set("localhost", "127.0.0.1", "::1")
	h := func(host string, local ...string) hostEnv {
		return hostEnv{lookup: names.lookup, hostname: func() (string, error) { return host, nil }, localAddrs: func() []string { return local }}
	}
	local := members(t, "localhost:29001\nlocalhost:29011\nlocalhost:29021\n")
	for _, c := range []struct {
		name    string
		members []compat.Member
		ip      string // "" = --ip not given
		port    int
		host    hostEnv
		want    string // address, or "error: ..." substring
	}{
		{"pod host name, first label, no DNS needed", pods, "", 8848, h("lockd-2"), "lockd-2" + ns + ":8848"},
		{"full host name", pods, "", 8848, h("LOCKD-1" + ns), "lockd-1" + ns + ":8848"},
		{"--ip names the member", pods, "lockd-2" + ns, 8848, h("elsewhere"), "lockd-2" + ns + ":8848"},
		{"--ip is the IP a name resolves to", pods, "10.1.0.11", 8848, h("elsewhere"), "lockd-1" + ns + ":8848"},
		{"--ip resolves to no member", pods, "10.1.0.99", 8848, h("lockd-0"), "error: (10.1.0.99:8848) is not listed"},
		{"a name resolving to a local address", pods, "", 8848, h("elsewhere", "127.0.0.1", "10.1.0.10"), "lockd-0" + ns + ":8848"},
		{"localhost members told apart by the main port", local, "", 29011, h("ci-runner", "127.0.0.1", "::1"), "localhost:29011"},
		{"wrong port", pods, "", 9999, h("lockd-0"), "error: is not listed"},
		{"nothing matches", pods, "", 8848, h("build-7", "192.168.1.5"), "error: nor found by its host name"},
		{"IP members: the default 127.0.0.1 first, as before names", members(t, "127.0.0.1:8848\n10.1.0.10:8848\n"), "", 8848, h("x", "10.1.0.10"), "127.0.0.1:8848"},
		{"IP members: an address of this machine", members(t, "10.1.0.10:8848\n10.1.0.11:8848\n"), "", 8848, h("x", "10.1.0.11"), "10.1.0.11:8848"},
		{"two names on this machine, same port", members(t, "localhost:8848\nlockd-0"+ns+":8848\n"), "", 8848, h("x", "127.0.0.1", "10.1.0.10"), "error: matches several members"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ip := c.ip
			if ip == "" {
				ip = compat.DefaultIPAddress
			}
			got, err := findSelf(c.members, ip, c.ip != "", c.port, c.host)
			if want, isErr := strings.CutPrefix(c.want, "error: "); isErr {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("got %v, %v; want an error containing %q", got, err, want)
				}
				return
			}
			if err != nil || got.Address() != c.want {
				t.Fatalf("got %v, %v; want %s", got.Address(), err, c.want)
			}
		})
	}
}

// logLines counts the lines of a log that hold both msg and what.
func logLines(l *syncbuf.Buffer, msg, what string) int {
	n := 0
	for _, line := range strings.Split(l.String(), "\n") {
		if strings.Contains(line, msg) && strings.Contains(line, what) {
			n++
		}
	}
	return n
}

// waitFor polls cond without a deadline of its own: the test's timeout
// ends a watch that never logs what it should.
func waitFor(cond func() bool) {
	for !cond() {
		time.Sleep(time.Millisecond)
	}
}

func TestWatchNames(t *testing.T) {
	ms := members(t, "a.lockd.test:8848\nb.lockd.test:8848\n10.0.0.9:8848\n")
	names := &fakeNames{}
	names.set("a.lockd.test", "127.0.0.11")
	var out syncbuf.Buffer
	h := hostEnv{lookup: names.lookup}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		self, _ := compat.FindMember(ms, "a.lockd.test", 8848)
		watchNames(ctx, ms, self, h, zerolog.New(&out), time.Millisecond)
	}()
	b := "b.lockd.test:8848"
	waitFor(func() bool { return names.lookups("b.lockd.test") >= 64 })
	unresolved := names.lookups("b.lockd.test")
	names.set("b.lockd.test", "127.0.0.12")
	waitFor(func() bool { return logLines(&out, msgNameResolved, `"127.0.0.12"`) == 1 })
	names.set("b.lockd.test", "127.0.0.13") // the pod came back elsewhere
	waitFor(func() bool { return logLines(&out, msgNameResolved, `"127.0.0.13"`) == 1 })
	cancel()
	<-done
	if n := logLines(&out, msgNameResolved, b); n != 2 {
		t.Errorf("%d resolved lines for %s, want one per address change (2)", n, b)
	}
	// Itself and IP members are not watched.
	if logLines(&out, "", "a.lockd.test") != 0 || logLines(&out, "", "10.0.0.9") != 0 || names.lookups("a.lockd.test") != 0 {
		t.Errorf("watched itself or an IP member:\n%s", out.String())
	}
	// The warning backs off: many passes, a few lines.
	// The warning backs off (the interval doubles): at least one, and far
	// fewer than there were lookups.
	if n := logLines(&out, msgNameUnresolved, b); n == 0 || n > unresolved/4 {
		t.Errorf("%d warnings in %d lookups of one name that did not resolve, want 1..%d", n, unresolved, unresolved/4)
	}
}

func TestWaitOwnName(t *testing.T) {
	names := &fakeNames{}
	self := members(t, "c.lockd.test:8848\n")[0]
	var out syncbuf.Buffer
	done := make(chan error, 1)
	go func() {
		done <- waitOwnName(context.Background(), self, hostEnv{lookup: names.lookup}, zerolog.New(&out), time.Millisecond)
	}()
	waitFor(func() bool { return logLines(&out, msgOwnNameWait, "c.lockd.test") >= 1 })
	select {
	case err := <-done:
		t.Fatalf("returned %v before the name resolved", err)
	default:
	}
	names.set("c.lockd.test", "127.0.0.13")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := waitOwnName(ctx, members(t, "d.lockd.test:8848\n")[0], hostEnv{lookup: names.lookup}, zerolog.Nop(), time.Millisecond); err == nil || !strings.Contains(err.Error(), "d.lockd.test") {
		t.Fatalf("a stopped wait: %v", err)
	}
}
