package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"nacos-lockd/compat"
)

// hostEnv is what finding this node among the members, and watching the
// members' names, asks of the machine. Tests switch it (sysHost) to
// resolve names of their own.
type hostEnv struct {
	lookup     func(ctx context.Context, host string) ([]string, error)
	hostname   func() (string, error)
	localAddrs func() []string // every interface address, loopback included
}

var sysHost = hostEnv{lookup: net.DefaultResolver.LookupHost, hostname: os.Hostname, localAddrs: interfaceIPs}

func interfaceIPs() []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok {
			out = append(out, n.IP.String())
		}
	}
	return out
}

// lookupTimeout bounds one resolution; a name that takes longer is treated
// as not resolving yet.
const lookupTimeout = 2 * time.Second

func (h hostEnv) resolve(host string) ([]string, error) {
	if net.ParseIP(host) != nil {
		return []string{host}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), lookupTimeout)
	defer cancel()
	addrs, err := h.lookup(ctx, host)
	if err == nil && len(addrs) == 0 {
		err = fmt.Errorf("lookup %s: no addresses", host)
	}
	return addrs, err
}

// findSelf picks this node's member among those with its main port.
// Nacos matches its own ip:port; members listed by name need more:
//
//  1. --ip (or nacos.inetutils.ip-address) given: the member it names,
//     an IP or a name exactly as listed; for an IP, else the one member
//     whose name resolves to it.
//  2. --ip not given: a member listed as 127.0.0.1 (the default --ip, as
//     before names were allowed); else the member named by this host's
//     name, whole or as the first label of the listed name (a StatefulSet
//     pod is named nacos-lockd-0 and listed as
//     nacos-lockd-0.nacos-lockd-headless.<ns>.svc.cluster.local), which
//     needs no DNS; else the one member whose name or IP is, or resolves
//     to, an address of this machine (as Nacos finds itself among IPs).
//
// Two candidates by the same rule are an error, not a guess: two nodes
// must never take the same replica id.
func findSelf(members []compat.Member, ip string, ipSet bool, port int, h hostEnv) (compat.Member, error) {
	var withPort []compat.Member
	for _, m := range members {
		if m.Port == port {
			withPort = append(withPort, m)
		}
	}
	one := func(rule string, match func(compat.Member) bool) (compat.Member, bool, error) {
		var found []compat.Member
		for _, m := range withPort {
			if match(m) {
				found = append(found, m)
			}
		}
		switch len(found) {
		case 0:
			return compat.Member{}, false, nil
		case 1:
			return found[0], true, nil
		}
		var names []string
		for _, m := range found {
			names = append(names, m.Address())
		}
		return compat.Member{}, false, fmt.Errorf("%s matches several members (%s): set --ip to this node's entry as cluster.conf writes it", rule, strings.Join(names, ", "))
	}
	resolvesTo := func(want func(string) bool) func(compat.Member) bool {
		return func(m compat.Member) bool {
			addrs, err := h.resolve(m.Host)
			return err == nil && slices.ContainsFunc(addrs, want)
		}
	}
	if ipSet {
		if m, ok := compat.FindMember(members, ip, port); ok {
			return m, nil
		}
		if net.ParseIP(ip) != nil {
			m, ok, err := one("--ip "+ip+" resolved", func(m compat.Member) bool {
				return m.IsName() && resolvesTo(func(a string) bool { return sameIP(a, ip) })(m)
			})
			if ok || err != nil {
				return m, err
			}
		}
		return compat.Member{}, notListed(members, net.JoinHostPort(ip, fmt.Sprint(port)))
	}
	if m, ok := compat.FindMember(members, compat.DefaultIPAddress, port); ok {
		return m, nil
	}
	if host, err := h.hostname(); err == nil && host != "" {
		host = strings.ToLower(host)
		m, ok, err := one("host name "+host, func(m compat.Member) bool {
			return m.Host == host || (!strings.Contains(host, ".") && strings.HasPrefix(m.Host, host+"."))
		})
		if ok || err != nil {
			return m, err
		}
	}
	local := h.localAddrs()
	m, ok, err := one("an address of this machine", resolvesTo(func(a string) bool {
		return slices.ContainsFunc(local, func(l string) bool { return sameIP(a, l) })
	}))
	if ok || err != nil {
		return m, err
	}
	return compat.Member{}, notListed(members, net.JoinHostPort(compat.DefaultIPAddress, fmt.Sprint(port)))
}

func sameIP(a, b string) bool {
	x, y := net.ParseIP(a), net.ParseIP(b)
	return x != nil && x.Equal(y)
}

func notListed(members []compat.Member, self string) error {
	var listed []string
	for _, m := range members {
		listed = append(listed, m.Address())
	}
	return fmt.Errorf("this node (%s) is not listed in cluster.conf (members: %s), nor found by its host name or addresses; set --ip and --port to this node's entry (--ip takes the IP or the name cluster.conf lists)",
		self, strings.Join(listed, " "))
}

// nameWatch is the server's Names: this node's own name waited for before
// Raft listens, every 2 s; the others' names watched every 5 s.
type nameWatch struct {
	self    compat.Member
	members []compat.Member
	host    hostEnv
	log     zerolog.Logger
}

func (n nameWatch) WaitOwn(ctx context.Context) error {
	return waitOwnName(ctx, n.self, n.host, n.log, 2*time.Second)
}

func (n nameWatch) Watch(ctx context.Context) {
	watchNames(ctx, n.members, n.self, n.host, n.log, 5*time.Second)
}

// Log messages of the name watch, for operators and tests.
const (
	msgNameUnresolved = "cluster member's name does not resolve yet; Raft dials it by name and retries"
	msgNameResolved   = "cluster member's name resolves"
	msgOwnNameWait    = "this node's own name does not resolve yet; waiting for it before Raft listens on its addresses"
)

// waitOwnName waits until this node's own name resolves: dragonboat
// listens on the addresses its Raft address's name resolves to, and fails
// to start without any. In a StatefulSet the pod's own name is in its
// /etc/hosts from the start; elsewhere DNS may lag the node's start.
func waitOwnName(ctx context.Context, self compat.Member, h hostEnv, log zerolog.Logger, every time.Duration) error {
	if !self.IsName() {
		return nil
	}
	for {
		addrs, err := h.resolve(self.Host)
		if err == nil {
			log.Info().Str("name", self.Host).Strs("addrs", addrs).Msg("this node's own name resolves; Raft listens on its IPv4 addresses")
			return nil
		}
		log.Warn().Err(err).Str("name", self.Host).Dur("retry_in", every).Msg(msgOwnNameWait)
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("wait for this node's name %s to resolve: %w", self.Host, ctx.Err())
		case <-t.C:
		}
	}
}

// watchNames reports, for the operator, the members listed by name that do
// not resolve (yet): at start-up in a StatefulSet the other pods' names
// appear one by one. Nothing waits for them: dragonboat's TCP transport
// dials the address string on every connection attempt, so it resolves
// the name again each time it reconnects and reaches a member at its
// current IP. The watch logs a warning while a name does not resolve, and
// at info when it does and whenever its addresses change, until ctx ends.
func watchNames(ctx context.Context, members []compat.Member, self compat.Member, h hostEnv, log zerolog.Logger, every time.Duration) {
	type state struct {
		addrs    string        // as last logged; "" while unresolved
		nextWarn time.Time     // unresolved: when to say so again
		backoff  time.Duration // doubles up to 5 min, so a member that is gone for good is not a flood
	}
	seen := map[string]*state{}
	for {
		for _, m := range members {
			if !m.IsName() || m == self {
				continue
			}
			st, ok := seen[m.Host]
			if !ok {
				st = &state{}
				seen[m.Host] = st
			}
			addrs, err := h.resolve(m.Host)
			if err != nil {
				if st.addrs != "" || st.backoff == 0 {
					st.addrs, st.backoff, st.nextWarn = "", every, time.Time{}
				}
				if now := time.Now(); !now.Before(st.nextWarn) {
					log.Warn().Err(err).Str("member", m.Address()).Dur("retry_in", every).Msg(msgNameUnresolved)
					st.nextWarn = now.Add(st.backoff)
					st.backoff = min(2*st.backoff, 5*time.Minute)
				}
				continue
			}
			slices.Sort(addrs)
			if now := strings.Join(addrs, ","); st.addrs != now {
				log.Info().Str("member", m.Address()).Strs("addrs", addrs).Msg(msgNameResolved)
				st.addrs, st.backoff = now, 0
			}
		}
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}
