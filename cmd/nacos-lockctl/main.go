// Command nacos-lockctl operates nacos-lockd: it takes and releases locks
// over the real Nacos gRPC protocol, and lists, inspects and
// force-releases them and manages the cluster through the admin API.
//
//	nacos-lockctl [--server 127.0.0.1:8848] [--json] [--token T] <command> [args and flags]
//
// Flags go before or after the command and its arguments (args.go).
// --server (or NACOS_LOCKCTL_SERVER) is any node's main port; lock
// commands use its SDK port (main + 1000), admin commands its HTTP API.
// With auth on, --token (or NACOS_LOCKCTL_TOKEN, or NACOS_LOCKD_TOKEN)
// carries an access token from `nacos-lockctl login`, or
// NACOS_LOCKCTL_USERNAME and NACOS_LOCKCTL_PASSWORD log in first:
// a global admin's for admin commands, one with write permission on the
// key for lock commands.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"nacos-lockd/gateway/admin/adminapi"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	var code exitCode
	switch {
	case errors.As(err, &code):
		os.Exit(int(code))
	case err != nil:
		fmt.Fprintln(os.Stderr, "nacos-lockctl:", err)
		os.Exit(1)
	}
}

// exitCode ends the process with a status but no message (a refused try,
// or the exit status of a held command).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

type ctl struct {
	server  string
	json    bool
	token   string // access token for the admin API and lock requests; "" with auth off
	in      io.Reader
	out     io.Writer
	errOut  io.Writer
	http    *http.Client
	timeout time.Duration
}

const usage = `usage: nacos-lockctl [--server ip:port] [--json] [--token T] <command> [args and flags]

Flags may come before or after the command and its arguments. Environment:
NACOS_LOCKCTL_SERVER (for --server), NACOS_LOCKCTL_TOKEN (for --token; also
NACOS_LOCKD_TOKEN), or NACOS_LOCKCTL_USERNAME and NACOS_LOCKCTL_PASSWORD to
log in before each command.

lock commands (Nacos gRPC protocol; flags: --type, --lease ms, --wait ms, --owner):
  try <key>                 one attempt (or wait up to --wait); exits 0 if granted, 3 if not.
                            The lock is released when nacos-lockctl exits (the server
                            frees a closed connection's locks): to keep it, use lock or hold
  lock <key>                acquire (waiting up to --wait), then hold and renew until interrupted
  hold <key> -- <cmd...>    acquire, run cmd with NACOS_LOCK_KEY and NACOS_LOCK_FENCING_TOKEN
                            set, renew while it runs, release when it exits; exits with its code;
                            cmd gets SIGTERM if the lock is lost (then exit 1)
  unlock <key> --owner o    release a lock held by owner o
  renew <key> --owner o     renew a lock held by owner o

admin commands (admin API; with auth on, a global admin's --token):
  ls                        held locks, a table (flags: --type, --prefix, --limit n
                            (0 = all), --page n, --stale); follows the API's cursors
  get <type> <key>          one lock: holder, connection, client IP, fencing token,
                            acquired at, lease end and time left, count, waiters
  force-release <type> <key>
                            release whoever holds it; the next waiter gets it
                            (--fencing-token n: only if that grant still holds it)
  watch                     a table of held locks, refreshed every --interval (1s)
                            until interrupted (--type, --prefix, --limit, --count n)
  login --username u        print an access token for --token / NACOS_LOCKCTL_TOKEN
                            (--password p, or --password-stdin)
  cluster list              members, their roles and ports
  cluster add <ip:port>     add a member (then start it with --join)
  cluster remove <ip:port>  remove a member

exit status: 0 done; 3 refused (not granted, not held, changed hands); 1 error.
`

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("nacos-lockctl", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, usage); fs.PrintDefaults() }
	server := fs.String("server", "127.0.0.1:8848", "a node's main port (HTTP admin API) (default $NACOS_LOCKCTL_SERVER, else 127.0.0.1:8848)")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	timeout := fs.Duration("timeout", 15*time.Second, "how long to wait for the server")
	token := fs.String("token", "", "access token, when auth is on (default $NACOS_LOCKCTL_TOKEN or $NACOS_LOCKD_TOKEN, or a login as $NACOS_LOCKCTL_USERNAME with $NACOS_LOCKCTL_PASSWORD); see login")
	global, command, rest := splitArgs(args)
	if err := fs.Parse(global); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	env := settingsFromEnv(os.Getenv)
	if !flagSet(fs, "server") && env.server != "" {
		*server = env.server
	}
	if *token == "" {
		*token = env.token // not the flag's default: -help would print it
	}
	c := &ctl{server: *server, json: *asJSON, token: *token, in: stdin, out: stdout, errOut: stderr,
		http: &http.Client{Timeout: *timeout}, timeout: *timeout}
	if command == "" {
		fs.Usage()
		for _, a := range rest {
			if n, _, ok := flagName(a); ok && (n == "h" || n == "help") {
				return nil
			}
		}
		return errNoCommand
	}
	// Credentials in the environment stand for a login before the command
	// (not for login itself, which is given its own).
	if c.token == "" && env.username != "" && command != "login" {
		t, err := c.loginToken(ctx, env.username, env.password)
		if err != nil {
			return fmt.Errorf("log in as $NACOS_LOCKCTL_USERNAME %q: %w", env.username, err)
		}
		c.token = t
	}
	if lockCommands[command] {
		return c.lockCommand(ctx, command, rest)
	}
	if adminCommands[command] {
		return c.adminCommand(ctx, command, rest)
	}
	if command != "cluster" {
		fs.Usage()
		return errNoCommand
	}
	cfs := c.flags("cluster")
	sub, after, _, err := parseInterleaved(cfs, rest)
	if err != nil {
		return err
	}
	sub = append(sub, after...)
	switch {
	case len(sub) == 1 && sub[0] == "list":
		return c.list(ctx)
	case len(sub) == 2 && sub[0] == "add":
		// The level: what a node of this release reads (the server refuses a
		// member below the cluster's level; the node's --join is checked again).
		return c.change(ctx, http.MethodPost, "/v1/cluster/members", map[string]any{"address": sub[1], "level": adminapi.BuildLevel}, "added")
	case len(sub) == 2 && sub[0] == "remove":
		return c.change(ctx, http.MethodDelete, "/v1/cluster/members/"+url.PathEscape(sub[1]), nil, "removed")
	}
	fs.Usage()
	return errNoCommand
}

// envSettings are the environment variables nacos-lockctl reads, like
// etcdctl's ETCDCTL_ENDPOINTS: set them once after a login and every
// later command goes to the same server with the same token.
type envSettings struct {
	server             string // NACOS_LOCKCTL_SERVER
	token              string // NACOS_LOCKCTL_TOKEN, else NACOS_LOCKD_TOKEN (the older name)
	username, password string // NACOS_LOCKCTL_USERNAME, NACOS_LOCKCTL_PASSWORD: log in per command
}

func settingsFromEnv(getenv func(string) string) envSettings {
	e := envSettings{server: getenv("NACOS_LOCKCTL_SERVER"), token: getenv("NACOS_LOCKCTL_TOKEN"),
		username: getenv("NACOS_LOCKCTL_USERNAME"), password: getenv("NACOS_LOCKCTL_PASSWORD")}
	if e.token == "" {
		e.token = getenv("NACOS_LOCKD_TOKEN")
	}
	return e
}

type member struct {
	ReplicaID   uint64 `json:"replicaId"`
	Address     string `json:"address"`
	RaftAddress string `json:"raftAddress"`
	Role        string `json:"role,omitempty"`
	Self        bool   `json:"self,omitempty"`
}

func (c *ctl) do(ctx context.Context, method, path string, body any, out any) error {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		r = bytes.NewReader(b)
	}
	data, err := c.send(ctx, method, path, r, "application/json")
	if err != nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// apiError is a reply other than 200 OK.
type apiError struct {
	Status int
	Msg    string // "404 Not Found: ..."
}

func (e *apiError) Error() string { return e.Msg }

// send makes one admin API call, with the access token when there is one,
// and returns the body of a 200 reply; any other status is an *apiError.
func (c *ctl) send(ctx context.Context, method, path string, body io.Reader, contentType string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+c.server+path, body)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", contentType)
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("read reply: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error   string `json:"error"`
			Message string `json:"message"` // auth refusals
		}
		msg := string(bytes.TrimSpace(data))
		if json.Unmarshal(data, &e) == nil && (e.Error != "" || e.Message != "") {
			msg = e.Error + e.Message
		}
		if resp.StatusCode == http.StatusForbidden && c.token == "" {
			msg += " (auth is on: pass --token or set NACOS_LOCKCTL_TOKEN or NACOS_LOCKD_TOKEN; see nacos-lockctl login)"
		}
		return data, &apiError{Status: resp.StatusCode, Msg: resp.Status + ": " + msg}
	}
	return data, nil
}

func (c *ctl) list(ctx context.Context) error {
	var out struct {
		Members []member `json:"members"`
	}
	if err := c.do(ctx, http.MethodGet, "/v1/cluster/members", nil, &out); err != nil {
		return err
	}
	if c.json {
		return json.NewEncoder(c.out).Encode(out)
	}
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ADDRESS\tROLE\tGRPC\tRAFT\tREPLICA\t")
	for _, m := range out.Members {
		addr := m.Address
		if m.Self {
			addr += " *"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t\n", addr, m.Role, grpcOf(m.Address), m.RaftAddress, m.ReplicaID)
	}
	return tw.Flush()
}

func (c *ctl) change(ctx context.Context, method, path string, body any, verb string) error {
	var m member
	if err := c.do(ctx, method, path, body, &m); err != nil {
		return err
	}
	if c.json {
		return json.NewEncoder(c.out).Encode(m)
	}
	fmt.Fprintf(c.out, "%s %s (replica %d, raft %s)\n", verb, m.Address, m.ReplicaID, m.RaftAddress)
	return nil
}

// grpcOf is the SDK port of a member address: main port + 1000.
func grpcOf(address string) string {
	u, err := url.Parse("//" + address)
	if err != nil || u.Port() == "" {
		return "?"
	}
	var p int
	fmt.Sscan(u.Port(), &p)
	return fmt.Sprint(p + 1000)
}
