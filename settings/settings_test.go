package settings

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite README.md's settings table from the declarations")

// TestREADME keeps README.md's Configuration table in step with table.go.
// `make settings-readme` (go test ./settings -run TestREADME -update)
// rewrites it.
func TestREADME(t *testing.T) {
	const path = "../README.md"
	readme, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ReplaceTable(readme)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(readme, want) {
		return
	}
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Fatalf("README.md's settings table differs from settings/table.go; run `make settings-readme`. Want:\n%s", Table())
}

func TestDeclarations(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range All() {
		if err := s.check(); err != nil {
			t.Errorf("%s: %v", s.Name(), err)
		}
		if s.Env != "" {
			if seen[s.Env] {
				t.Errorf("%s: environment variable %s used twice", s.Name(), s.Env)
			}
			seen[s.Env] = true
		}
		for _, name := range []string{s.Prop, s.Alias} {
			if got, ok := Lookup(name); name != "" && (!ok || got != s) {
				t.Errorf("Lookup(%q) does not find %s", name, s.Name())
			}
		}
		if got, ok := Lookup("--" + s.Flag); s.Flag != "" && (!ok || got != s) {
			t.Errorf("Lookup(--%s) does not find %s", s.Flag, s.Name())
		}
	}
	if _, ok := Lookup("nacos.lock.no_such_setting"); ok {
		t.Error("Lookup found an undeclared setting")
	}
}

func TestCheckInt(t *testing.T) {
	for _, tt := range []struct {
		s    *Setting
		v    int64
		want string
	}{
		{LockMaxKeyLength, 1, ""},
		{LockMaxKeyLength, 60000, ""},
		{LockMaxKeyLength, 0, "must be between 1 and 60000"},
		{LockMaxKeyLength, 60001, "must be between 1 and 60000"},
		{LockDisconnectGrace, 0, ""},
		{RaftElectionTimeout, 0, ""}, // the mode's default
		{RaftElectionTimeout, 9, "must be between 10 and 60000"},
		{AuthTokenExpire, 0, "must be between 1 second and 10 years"},
		{CoalesceWindow, int64(time.Second + 1), "must be between 0 and 1000000000"},
	} {
		if got := tt.s.CheckInt(tt.v); got != tt.want {
			t.Errorf("%s: CheckInt(%d) = %q, want %q", tt.s.Name(), tt.v, got, tt.want)
		}
	}
	if got := LogLevel.ChoiceList(); got != "trace, debug, info, warn or error" {
		t.Errorf("ChoiceList = %q", got)
	}
}

type bound struct {
	Lease    time.Duration `setting:"nacos.lock.default_expire_time"`
	LeaseMs  int64         `setting:"nacos.lock.max_expire_time"`
	Locks    uint64        `setting:"nacos.lock.max_locks"`
	Waiters  uint32        `setting:"nacos.lock.max_waiters_per_lock"`
	Rate     float64       `setting:"nacos.lock.max_requests_per_second"`
	Keys     int           `setting:"nacos.lock.max_key_length"`
	Election int64         `setting:"nacos.lock.raft.election_timeout_ms"`
	Window   time.Duration `setting:"--coalesce-window"`
	Other    int
}

func TestBind(t *testing.T) {
	var b bound
	FillDefaults(&b)
	want := bound{Lease: 30 * time.Second, LeaseMs: 1_800_000, Locks: 2_000_000, Waiters: 10_000, Rate: 2000,
		Keys: 4096, Window: 20 * time.Millisecond}
	if b != want {
		t.Fatalf("defaults %+v, want %+v", b, want)
	}
	if err := Check(&b); err != nil {
		t.Fatalf("defaults do not check: %v", err)
	}
	b.Lease, b.Keys, b.Rate, b.Locks = 500*time.Microsecond, 60_001, 0.5, 1<<63
	err := Check(&b)
	var re *RangeError
	if !errors.As(err, &re) || re.Field != "Lease" {
		t.Fatalf("err = %v, want a RangeError for Lease first", err)
	}
	for _, s := range []string{
		"Lease (nacos.lock.default_expire_time) 500µs: must be between 1 and 3153600000000 (ms)",
		"Keys (nacos.lock.max_key_length) 60001: must be between 1 and 60000",
		"Rate (nacos.lock.max_requests_per_second) 0.5",
		"Locks (nacos.lock.max_locks) 9223372036854775808",
	} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("err = %v, want it to contain %q", err, s)
		}
	}

	var c bound
	c.Other = 7
	Copy(&c, &struct {
		LeaseMs int64 `setting:"nacos.lock.default_expire_time"`
		Locks   int64 `setting:"nacos.lock.max_locks"`
		Rate    int   `setting:"nacos.lock.max_requests_per_second"`
	}{LeaseMs: 1500, Locks: 3, Rate: 9})
	if c.Lease != 1500*time.Millisecond || c.Locks != 3 || c.Rate != 9 || c.Other != 7 || c.Keys != 0 {
		t.Fatalf("copied %+v", c)
	}
}

func TestBindRefusesMistakes(t *testing.T) {
	for name, ptr := range map[string]any{
		"undeclared": &struct {
			X int `setting:"nacos.lock.nope"`
		}{},
		"duration for ints": &struct {
			X time.Duration `setting:"nacos.lock.max_locks"`
		}{},
		"string field": &struct {
			X string `setting:"nacos.lock.max_locks"`
		}{},
		"not a number": &struct {
			X int `setting:"nacos.core.auth.enabled"`
		}{},
		"not a pointer": struct{}{},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Fields did not panic", name)
				}
			}()
			Fields(ptr)
		}()
	}
}

func TestFlags(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	f := RegisterFlags(fs)
	if err := fs.Parse([]string{"--port", "9000", "--join"}); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"NACOS_LOCKD_PORT": "7000", "NACOS_LOCKD_DATA_DIR": "/srv", "NACOS_LOCKD_COALESCE_WINDOW": "0s"}
	if err := f.FromEnv(func(k string) string { return env[k] }); err != nil {
		t.Fatal(err)
	}
	if f.Int(MainPort) != 9000 || f.String(DataDir) != "/srv" || !f.Bool(Join) || f.Duration(CoalesceWindow) != 0 ||
		f.String(LogLevel) != "info" || f.String(IPAddress) != "" {
		t.Fatalf("port %d, data dir %q, join %v, window %s, level %q, ip %q", f.Int(MainPort), f.String(DataDir),
			f.Bool(Join), f.Duration(CoalesceWindow), f.String(LogLevel), f.String(IPAddress))
	}
	if !f.IsSet(MainPort) || !f.IsSet(DataDir) || f.IsSet(LogLevel) {
		t.Fatal("IsSet is wrong")
	}
	if EnvOf("port") != "NACOS_LOCKD_PORT" || EnvOf("join") != "" {
		t.Fatal("EnvOf is wrong")
	}
	env["NACOS_LOCKD_LOG_FORMAT"] = "x"
	env["NACOS_LOCKD_COALESCE_WINDOW"] = "soon"
	fs = flag.NewFlagSet("t", flag.ContinueOnError)
	f = RegisterFlags(fs)
	if err := f.FromEnv(func(k string) string { return env[k] }); err == nil || !strings.Contains(err.Error(), `NACOS_LOCKD_COALESCE_WINDOW="soon"`) {
		t.Fatalf("bad env: %v", err)
	}
}
