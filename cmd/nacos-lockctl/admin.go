package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"nacos-lockd/gateway/admin/adminapi"
	"nacos-lockd/statemachine/lockview"
)

var adminCommands = map[string]bool{"ls": true, "get": true, "force-release": true, "watch": true, "login": true}

func (c *ctl) adminCommand(ctx context.Context, cmd string, args []string) error {
	switch cmd {
	case "ls":
		return c.ls(ctx, args)
	case "get":
		return c.get(ctx, args)
	case "force-release":
		return c.forceRelease(ctx, args)
	case "watch":
		return c.watch(ctx, args)
	case "login":
		return c.login(ctx, args)
	}
	return fmt.Errorf("unknown command %q", cmd)
}

func (c *ctl) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(c.errOut)
	return fs
}

// listFlags are the filters of ls and watch.
type listFlags struct {
	typ, prefix string
	limit, page int
	stale       bool
}

func (c *ctl) addListFlags(fs *flag.FlagSet, lf *listFlags, defLimit int) {
	fs.StringVar(&lf.typ, "type", "", "only this lock type: NACOS_LOCK, REENTRANT or NON_REENTRANT")
	fs.StringVar(&lf.prefix, "prefix", "", "only keys starting with this")
	fs.IntVar(&lf.limit, "limit", defLimit, "at most this many locks (0: all)")
	fs.IntVar(&lf.page, "page", 500, fmt.Sprintf("locks per API request, 1 to %d", lockview.MaxListLimit))
	fs.BoolVar(&lf.stale, "stale", false, "read the node's replica as it is, not linearizably")
}

type listPage struct {
	Locks       []json.RawMessage `json:"locks"`
	NextCursor  string            `json:"nextCursor"`
	Consistency string            `json:"consistency"`
}

// listLocks fetches locks page by page, following the API's cursors, up
// to lf.limit of them (0: all). more reports that the limit cut it short.
func (c *ctl) listLocks(ctx context.Context, lf listFlags) (raw []json.RawMessage, rows []adminapi.Lock, more bool, err error) {
	if lf.page < 1 || lf.page > lockview.MaxListLimit {
		return nil, nil, false, fmt.Errorf("--page %d: want 1 to %d", lf.page, lockview.MaxListLimit)
	}
	cursor := ""
	for {
		n := lf.page
		if lf.limit > 0 {
			n = min(n, lf.limit-len(raw))
		}
		q := url.Values{"limit": {strconv.Itoa(n)}}
		for k, v := range map[string]string{"type": lf.typ, "prefix": lf.prefix, "cursor": cursor} {
			if v != "" {
				q.Set(k, v)
			}
		}
		if lf.stale {
			q.Set("stale", "true")
		}
		var page listPage
		if err := c.do(ctx, http.MethodGet, "/v1/locks?"+q.Encode(), nil, &page); err != nil {
			return nil, nil, false, err
		}
		for _, r := range page.Locks {
			var row adminapi.Lock
			if err := json.Unmarshal(r, &row); err != nil {
				return nil, nil, false, fmt.Errorf("decode lock: %w", err)
			}
			raw, rows = append(raw, r), append(rows, row)
		}
		if page.NextCursor == "" {
			return raw, rows, false, nil
		}
		if lf.limit > 0 && len(raw) >= lf.limit {
			return raw, rows, true, nil
		}
		cursor = page.NextCursor
	}
}

func (c *ctl) ls(ctx context.Context, args []string) error {
	fs := c.flags("ls")
	var lf listFlags
	c.addListFlags(fs, &lf, 0)
	pos, after, _, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if extra := append(pos, after...); len(extra) > 0 {
		return fmt.Errorf("ls: unexpected arguments %v", extra)
	}
	raw, rows, more, err := c.listLocks(ctx, lf)
	if err != nil {
		return err
	}
	if c.json {
		return json.NewEncoder(c.out).Encode(map[string]any{"locks": nonNil(raw), "more": more})
	}
	c.lockTable(rows, time.Now())
	if more {
		fmt.Fprintf(c.out, "(first %d shown; raise --limit, 0 for all)\n", len(rows))
	}
	return nil
}

func nonNil(raw []json.RawMessage) []json.RawMessage {
	if raw == nil {
		return []json.RawMessage{}
	}
	return raw
}

// lockTable prints held locks, one a line.
func (c *ctl) lockTable(rows []adminapi.Lock, now time.Time) {
	tw := tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TYPE\tKEY\tOWNER\tCLIENT\tTOKEN\tCOUNT\tHELD\tLEASE LEFT\tWAITERS\t")
	for _, l := range rows {
		owner := display(l.Owner)
		if l.Unclaimed {
			owner += " (unclaimed)"
		}
		held := "?"
		if l.AcquiredAtMs != 0 {
			held = fmtMs(now.UnixMilli() - l.AcquiredAtMs)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%d\t\n", l.Type, display(l.Key), owner, orDash(l.ClientIP),
			l.FencingToken, l.ReentrantCount, held, fmtMs(l.TimeLeftMs), len(l.Waiters))
	}
	_ = tw.Flush()
}

func (c *ctl) get(ctx context.Context, args []string) error {
	fs := c.flags("get")
	stale := fs.Bool("stale", false, "read the node's replica as it is, not linearizably")
	typ, key, err := c.typeAndKey(fs, "get", args)
	if err != nil {
		return err
	}
	path := lockPath(typ, key)
	if *stale {
		path += "?stale=true"
	}
	data, err := c.send(ctx, http.MethodGet, path, nil, "application/json")
	if err := c.refusal(err); err != nil {
		return err
	}
	if c.json {
		_, err := c.out.Write(data)
		return err
	}
	var l adminapi.Lock
	if err := json.Unmarshal(data, &l); err != nil {
		return fmt.Errorf("decode lock: %w", err)
	}
	c.lockDetail(l, time.Now())
	return nil
}

func (c *ctl) lockDetail(l adminapi.Lock, now time.Time) {
	tw := tabwriter.NewWriter(c.out, 0, 4, 1, ' ', 0)
	conn := l.ConnectionID
	if l.ClientIP != "" {
		conn += fmt.Sprintf(" (client %s, node %s)", l.ClientIP, orDash(l.Node))
	}
	acquired := "unknown"
	if l.AcquiredAtMs != 0 {
		acquired = fmt.Sprintf("%s (%s ago)", fmtTime(l.AcquiredAtMs), fmtMs(now.UnixMilli()-l.AcquiredAtMs))
	}
	state := "held"
	if l.Unclaimed {
		state = "granted to a waiter, not yet claimed"
	}
	for _, kv := range [][2]string{
		{"type", l.Type}, {"key", display(l.Key)}, {"state", state}, {"owner", display(l.Owner)}, {"connection", conn},
		{"fencing token", strconv.FormatUint(l.FencingToken, 10)}, {"reentrant count", strconv.Itoa(int(l.ReentrantCount))},
		{"acquired at", acquired}, {"lease ends", fmt.Sprintf("%s (%s left)", fmtTime(l.LeaseEndMs), fmtMs(l.TimeLeftMs))},
		{"waiters", strconv.Itoa(len(l.Waiters))},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", kv[0], kv[1])
	}
	_ = tw.Flush()
	if len(l.Waiters) == 0 {
		return
	}
	tw = tabwriter.NewWriter(c.out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tOWNER\tCLIENT\tCONNECTION\tDEADLINE\tLEFT\t")
	for _, w := range l.Waiters {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t\n", w.Position, display(w.Owner), orDash(w.ClientIP), w.ConnectionID, fmtTime(w.DeadlineMs), fmtMs(w.TimeLeftMs))
	}
	_ = tw.Flush()
}

func (c *ctl) forceRelease(ctx context.Context, args []string) error {
	fs := c.flags("force-release")
	token := fs.Uint64("fencing-token", 0, "release only the grant with this fencing token (as get shows it)")
	typ, key, err := c.typeAndKey(fs, "force-release", args)
	if err != nil {
		return err
	}
	path := lockPath(typ, key) + "/force-release"
	if *token != 0 {
		path += "?fencingToken=" + strconv.FormatUint(*token, 10)
	}
	data, err := c.send(ctx, http.MethodPost, path, nil, "application/json")
	if err := c.refusal(err); err != nil {
		return err
	}
	if c.json {
		_, err := c.out.Write(data)
		return err
	}
	var r struct {
		Previous adminapi.Lock  `json:"previous"`
		Current  *adminapi.Lock `json:"current"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("decode reply: %w", err)
	}
	p := r.Previous
	fmt.Fprintf(c.out, "force-released %s %s: was held by %s (connection %s, fencing token %d, count %d)\n",
		typ, display(key), display(p.Owner), orDash(p.ConnectionID), p.FencingToken, p.ReentrantCount)
	if r.Current != nil {
		fmt.Fprintf(c.out, "now granted to waiter %s (fencing token %d, not yet claimed)\n", display(r.Current.Owner), r.Current.FencingToken)
	} else {
		fmt.Fprintln(c.out, "now free")
	}
	return nil
}

// refusal turns "not held" and "changed hands" replies into exit status 3
// (with the server's message), like a refused lock command.
func (c *ctl) refusal(err error) error {
	var ae *apiError
	if errors.As(err, &ae) && (ae.Status == http.StatusNotFound || ae.Status == http.StatusConflict) {
		fmt.Fprintln(c.errOut, ae.Msg)
		return exitCode(3)
	}
	return err
}

func (c *ctl) watch(ctx context.Context, args []string) error {
	fs := c.flags("watch")
	var lf listFlags
	c.addListFlags(fs, &lf, 100)
	interval := fs.Duration("interval", time.Second, "time between refreshes")
	count := fs.Int("count", 0, "stop after this many refreshes (0: until interrupted)")
	pos, after, _, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if extra := append(pos, after...); len(extra) > 0 {
		return fmt.Errorf("watch: unexpected arguments %v", extra)
	}
	if *interval < 100*time.Millisecond {
		return fmt.Errorf("--interval %v: at least 100ms", *interval)
	}
	clear := isTerminal(c.out) && !c.json
	t := time.NewTicker(*interval)
	defer t.Stop()
	for n := 1; ; n++ {
		rctx, cancel := context.WithTimeout(ctx, min(c.timeout, *interval*5))
		raw, rows, more, err := c.listLocks(rctx, lf)
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		now := time.Now()
		switch {
		case c.json:
			frame := map[string]any{"at": now.UTC().Format(time.RFC3339Nano), "locks": nonNil(raw), "more": more}
			if err != nil {
				frame["error"] = err.Error()
			}
			if err := json.NewEncoder(c.out).Encode(frame); err != nil {
				return err
			}
		default:
			if clear {
				fmt.Fprint(c.out, "\x1b[H\x1b[2J")
			} else if n > 1 {
				fmt.Fprintln(c.out)
			}
			fmt.Fprintf(c.out, "nacos-lockd %s at %s: ", c.server, now.Format("15:04:05"))
			switch {
			case err != nil:
				// The node may be restarting: say so and keep watching.
				fmt.Fprintf(c.out, "%v\n", err)
			case more:
				fmt.Fprintf(c.out, "first %d held locks (--limit)\n", len(rows))
			default:
				fmt.Fprintf(c.out, "%d held locks\n", len(rows))
			}
			if err == nil {
				c.lockTable(rows, now)
			}
		}
		if *count > 0 && n >= *count {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil // interrupted: the way watch ends
		case <-t.C:
		}
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// login asks the Nacos login route for a token, as the Java client does:
// POST /nacos/v3/auth/user/login?username=U with the form body password=P.
func (c *ctl) login(ctx context.Context, args []string) error {
	fs := c.flags("login")
	user := fs.String("username", "", "user name")
	password := fs.String("password", "", "password (visible to other users in the process list: prefer --password-stdin)")
	fromStdin := fs.Bool("password-stdin", false, "read the password from the first line of standard input")
	pos, after, _, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if *user == "" || len(pos)+len(after) > 0 {
		return errors.New("login: --username is required, and nothing else")
	}
	if *fromStdin {
		line, err := bufio.NewReader(c.in).ReadString('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read password: %w", err)
		}
		*password = strings.TrimRight(line, "\r\n")
	}
	path := "/nacos/v3/auth/user/login?" + url.Values{"username": {*user}}.Encode()
	body := strings.NewReader(url.Values{"password": {*password}}.Encode())
	data, err := c.send(ctx, http.MethodPost, path, body, "application/x-www-form-urlencoded")
	if err != nil {
		return err
	}
	if c.json {
		_, err := c.out.Write(data)
		return err
	}
	var r struct {
		AccessToken string `json:"accessToken"`
		TokenTTL    int64  `json:"tokenTtl"`
		GlobalAdmin bool   `json:"globalAdmin"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("decode login reply: %w", err)
	}
	if r.AccessToken == "" {
		fmt.Fprintln(c.errOut, "auth is off on this server: no token is needed")
		return nil
	}
	fmt.Fprintln(c.out, r.AccessToken)
	role := "not a global admin: lock commands only, where permitted"
	if r.GlobalAdmin {
		role = "global admin"
	}
	fmt.Fprintf(c.errOut, "token valid for %s (%s); use it with --token or NACOS_LOCKCTL_TOKEN\n", time.Duration(r.TokenTTL)*time.Second, role)
	return nil
}

// loginToken logs in as login does and returns the token ("" with auth
// off): for NACOS_LOCKCTL_USERNAME and NACOS_LOCKCTL_PASSWORD.
func (c *ctl) loginToken(ctx context.Context, user, password string) (string, error) {
	path := "/nacos/v3/auth/user/login?" + url.Values{"username": {user}}.Encode()
	body := strings.NewReader(url.Values{"password": {password}}.Encode())
	data, err := c.send(ctx, http.MethodPost, path, body, "application/x-www-form-urlencoded")
	if err != nil {
		return "", err
	}
	var r struct {
		AccessToken string `json:"accessToken"`
	}
	if err := json.Unmarshal(data, &r); err != nil {
		return "", fmt.Errorf("decode login reply: %w", err)
	}
	return r.AccessToken, nil
}

// typeAndKey reads "<type> <key>" (a key starting with "-" after "--"),
// and returns the flags after them.
func (c *ctl) typeAndKey(fs *flag.FlagSet, cmd string, args []string) (typ, key string, err error) {
	pos, after, _, err := parseInterleaved(fs, args)
	if err != nil {
		return "", "", err
	}
	pos = append(pos, after...) // after "--": a key that starts with "-"
	if len(pos) != 2 {
		return "", "", fmt.Errorf("%s: give the lock type and the key: %s <NACOS_LOCK|REENTRANT|NON_REENTRANT> <key>", cmd, cmd)
	}
	return pos[0], pos[1], nil
}

// lockPath is /v1/locks/{type}/{key} with the key escaped as one path
// segment (so "/", "//", "." and ".." in keys survive path cleaning).
func lockPath(typ, key string) string {
	e := url.PathEscape(key)
	if e == "." || e == ".." {
		e = strings.ReplaceAll(e, ".", "%2E")
	}
	return "/v1/locks/" + url.PathEscape(typ) + "/" + e
}

// display quotes a key or owner that would not read well in a table
// (empty, spaces, control characters); other Unicode stays as it is.
func display(s string) string {
	if s == "" || strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) || r == '"' }) >= 0 {
		return strconv.Quote(s)
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func fmtTime(ms int64) string {
	if ms > 1<<53 {
		return "never"
	}
	return time.UnixMilli(ms).Local().Format("2006-01-02 15:04:05.000")
}

// fmtMs shows a span for people: 850ms, 12.3s, 4m10s, 2h5m; "never" for
// the practically infinite.
func fmtMs(ms int64) string {
	switch {
	case ms < 0:
		return "-" + fmtMs(-ms)
	case ms > 100*365*24*3600*1000:
		return "never"
	case ms < 1000:
		return fmt.Sprintf("%dms", ms)
	case ms < 60_000:
		return fmt.Sprintf("%.1fs", float64(ms)/1000)
	}
	secs := (ms + 500) / 1000
	if secs >= 3600 {
		mins := (secs + 30) / 60
		return fmt.Sprintf("%dh%02dm", mins/60, mins%60)
	}
	return fmt.Sprintf("%dm%02ds", secs/60, secs%60)
}
