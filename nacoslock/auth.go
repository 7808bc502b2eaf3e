package nacoslock

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrLogin is returned by Dial when no server accepted the username and
// password.
var ErrLogin = errors.New("nacoslock: login refused")

// authenticator holds the access token of a Client that logs in, as the
// Java client does: username in the query string and password in a form
// body, on the main port, the v3 route first and the v1 route when a
// server does not know v3.
type authenticator struct {
	user, pass string
	servers    []string
	scheme     string
	http       *http.Client

	mu    sync.Mutex
	token string
	ttl   time.Duration
	at    time.Time // when the token was issued, by our clock
}

func newAuthenticator(o *options, servers []string) *authenticator {
	cfg, scheme := o.tls, "https"
	if o.loginTLSSet {
		cfg = o.loginTLS
	}
	if cfg == nil {
		scheme = "http"
	}
	tr := &http.Transport{TLSClientConfig: cloneTLS(cfg)}
	return &authenticator{
		user: o.username, pass: o.password, servers: servers, scheme: scheme,
		http: &http.Client{Transport: tr, Timeout: 10 * time.Second},
	}
}

func cloneTLS(c *tls.Config) *tls.Config {
	if c == nil {
		return nil
	}
	return c.Clone()
}

// current is the token to send; "" before the first login.
func (a *authenticator) current() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.token
}

// due reports whether the token should be renewed: after three quarters
// of its lifetime, so that a refresh that fails has time to be retried
// before the token ends.
func (a *authenticator) due(now time.Time) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.token != "" && now.Sub(a.at) >= a.ttl*3/4
}

// login tries every server until one issues a token.
func (a *authenticator) login(ctx context.Context) error {
	var errs []error
	for _, s := range a.servers {
		err := a.loginTo(ctx, s)
		if err == nil {
			return nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("log in as %q: %w", a.user, errors.Join(errs...))
}

func (a *authenticator) loginTo(ctx context.Context, server string) error {
	for _, path := range []string{"/nacos/v3/auth/user/login", "/nacos/v1/auth/users/login"} {
		started := time.Now()
		u := a.scheme + "://" + server + path + "?username=" + url.QueryEscape(a.user)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader("password="+url.QueryEscape(a.pass)))
		if err != nil {
			return fmt.Errorf("login request: %w", err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := a.http.Do(req)
		if err != nil {
			return fmt.Errorf("login on %s: %w", server, err)
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if err != nil {
			return fmt.Errorf("read login answer from %s: %w", server, err)
		}
		switch resp.StatusCode {
		case http.StatusOK:
			return a.accept(body, started)
		case http.StatusNotFound, http.StatusNotImplemented:
			continue // an older server: try the v1 route, as Java does
		case http.StatusForbidden, http.StatusUnauthorized:
			return fmt.Errorf("%w by %s", ErrLogin, server)
		default:
			return fmt.Errorf("login on %s: HTTP %d", server, resp.StatusCode)
		}
	}
	return fmt.Errorf("login on %s: no login route", server)
}

// accept reads {"accessToken":..., "tokenTtl": seconds}. tokenTtl may be
// a number or a numeric string. A 200 without a token means auth is off.
func (a *authenticator) accept(body []byte, issued time.Time) error {
	var out struct {
		AccessToken string          `json:"accessToken"`
		TokenTTL    json.RawMessage `json:"tokenTtl"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return fmt.Errorf("parse login answer: %w", err)
	}
	ttl, err := strconv.ParseInt(strings.Trim(string(out.TokenTTL), `"`), 10, 64)
	if err != nil || ttl <= 0 {
		ttl = 18000 // Nacos's default
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.token, a.ttl, a.at = out.AccessToken, time.Duration(ttl)*time.Second, issued
	return nil
}
