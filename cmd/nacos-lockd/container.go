package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"nacos-lockd/compat"
	"nacos-lockd/settings"
)

// `nacos-lockd container` is the entrypoint of the container image
// (deploy/container/Containerfile). The image is FROM scratch, without a
// shell to turn environment variables into a command line, so the server
// reads them itself: those of the nacos/nacos-server image where one maps
// (MODE, NACOS_SERVERS, NACOS_SERVER_PORT, NACOS_SERVER_IP,
// NACOS_AUTH_*), and the image's fixed paths, the same as Nacos's:
// /home/nacos/conf/application.properties and cluster.conf if mounted, and
// the data volume /data. NACOS_LOCKD_* variables and flags after
// `container` still win, as for a plain start.
const (
	containerConfig      = "/home/nacos/conf/application.properties"
	containerClusterConf = "/home/nacos/conf/cluster.conf"
	containerDataDir     = "/data"
	// fromEnvClusterConf is where NACOS_SERVERS is written as a cluster.conf,
	// in the data dir: the one place in the image the server may write.
	fromEnvClusterConf = "cluster.conf.from-env"
)

// containerEnvProps maps nacos/nacos-server's variables that stand for a
// property to that property.
var containerEnvProps = map[string]string{
	"NACOS_AUTH_ENABLE":               compat.PropAuthEnabled,
	"NACOS_AUTH_TOKEN":                compat.PropAuthSecretKey,
	"NACOS_AUTH_TOKEN_EXPIRE_SECONDS": compat.PropAuthTokenExpire,
	"NACOS_AUTH_IDENTITY_KEY":         compat.PropServerIdentityKey,
	"NACOS_AUTH_IDENTITY_VALUE":       compat.PropServerIdentityValue,
}

// containerSetup is what the container's environment means for a start.
type containerSetup struct {
	env         map[string]string // NACOS_LOCKD_* defaults, used where the variable is unset
	overlay     compat.Properties // over the properties file
	clusterConf []byte            // NACOS_SERVERS as a cluster.conf, to write to env[NACOS_LOCKD_CLUSTER_CONF]
	join        bool              // start with --join (NACOS_LOCKD_JOIN_FROM_ORDINAL)
}

// joinFromOrdinal reads NACOS_LOCKD_JOIN_FROM_ORDINAL=N: a StatefulSet pod
// whose ordinal (the host name's -N suffix) is N or more starts with
// --join. The pods of a StatefulSet share one command line, but the
// members it was created with bootstrap from cluster.conf while pods added
// by scaling up must join the running group (after nacos-lockctl cluster
// add). --join only matters on a first start, so the variable may stay.
func joinFromOrdinal(v, hostname string) (bool, error) {
	if v == "" {
		return false, nil
	}
	from, err := strconv.Atoi(v)
	if err != nil || from < 0 {
		return false, fmt.Errorf("NACOS_LOCKD_JOIN_FROM_ORDINAL=%q: want a pod ordinal (0, 1, ...)", v)
	}
	i := strings.LastIndexByte(hostname, '-')
	ord, err := strconv.Atoi(hostname[i+1:])
	if i < 0 || err != nil || ord < 0 {
		return false, fmt.Errorf("NACOS_LOCKD_JOIN_FROM_ORDINAL is set, but the host name %q ends in no StatefulSet ordinal (-0, -1, ...)", hostname)
	}
	return ord >= from, nil
}

// containerSettings reads the environment through getenv and the image's
// mountable files through readFile (false: absent).
func containerSettings(getenv func(string) string, readFile func(string) ([]byte, bool), localIPs func() []string) (containerSetup, error) {
	s := containerSetup{env: map[string]string{}, overlay: compat.Properties{}}
	def := func(k, v string) {
		if getenv(k) == "" && v != "" {
			s.env[k] = v
		}
	}
	get := func(k string) string {
		if v := getenv(k); v != "" {
			return v
		}
		return s.env[k]
	}
	def(settings.DataDir.Env, containerDataDir)
	if _, ok := readFile(containerConfig); ok {
		def(settings.ConfigFile.Env, containerConfig)
	}
	def(settings.MainPort.Env, getenv("NACOS_SERVER_PORT"))
	def(settings.IPAddress.Env, getenv("NACOS_SERVER_IP"))
	for env, prop := range containerEnvProps {
		if v := getenv(env); v != "" {
			s.overlay[prop] = v
		}
	}
	// PREFER_HOST_MODE=hostname (nacos-k8s sets it) needs nothing here:
	// members listed by name are found and dialled by name either way.

	host, _ := sysHost.hostname()
	join, err := joinFromOrdinal(getenv("NACOS_LOCKD_JOIN_FROM_ORDINAL"), host)
	if err != nil {
		return s, err
	}
	s.join = join

	servers := strings.Fields(strings.ReplaceAll(getenv("NACOS_SERVERS"), ",", " "))
	mode := strings.ToLower(getenv("MODE"))
	switch mode {
	case "standalone":
		return s, nil // a mounted cluster.conf or NACOS_SERVERS is not used
	case "", "cluster":
	default:
		return s, fmt.Errorf("MODE=%q: want standalone or cluster", getenv("MODE"))
	}
	var members []compat.Member
	switch {
	case get(settings.ClusterConf.Env) != "":
		return s, nil // given outright; the server reads and checks it
	case len(servers) > 0:
		var b bytes.Buffer
		fmt.Fprintln(&b, "# written by `nacos-lockd container` from NACOS_SERVERS")
		for _, m := range servers {
			fmt.Fprintln(&b, m)
		}
		var err error
		if members, err = compat.ParseClusterConf(bytes.NewReader(b.Bytes())); err != nil {
			return s, fmt.Errorf("NACOS_SERVERS=%q: %w", getenv("NACOS_SERVERS"), err)
		}
		s.clusterConf = b.Bytes()
		s.env[settings.ClusterConf.Env] = filepath.Join(get(settings.DataDir.Env), fromEnvClusterConf)
	case hasFile(readFile, containerClusterConf):
		b, _ := readFile(containerClusterConf)
		var err error
		if members, err = compat.ParseClusterConf(bytes.NewReader(b)); err != nil {
			return s, fmt.Errorf("%s: %w", containerClusterConf, err)
		}
		s.env[settings.ClusterConf.Env] = containerClusterConf
	case mode == "cluster":
		return s, fmt.Errorf("MODE=cluster needs NACOS_SERVERS (ip:port ...) or a cluster.conf mounted at %s", containerClusterConf)
	default:
		return s, nil // neither MODE nor members: a single node
	}
	if get(settings.IPAddress.Env) != "" || slices.ContainsFunc(members, compat.Member.IsName) {
		// Members by name: the server finds itself by the host name
		// (a StatefulSet pod's) or by what the names resolve to (findSelf).
		return s, nil
	}
	// As Nacos does, find this node among the members by its own addresses.
	var listed []string
	ips := localIPs()
	for _, m := range members {
		if slices.Contains(ips, m.Host) {
			s.env[settings.IPAddress.Env] = m.Host
			return s, nil
		}
		listed = append(listed, m.Host)
	}
	return s, fmt.Errorf("none of this container's addresses %v is a cluster member %v: set NACOS_SERVER_IP", ips, listed)
}

func runContainer(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	readFile := func(p string) ([]byte, bool) {
		b, err := os.ReadFile(p)
		return b, err == nil
	}
	s, err := containerSettings(os.Getenv, readFile, localIPs)
	if err != nil {
		return err
	}
	getenv := func(k string) string {
		if v := os.Getenv(k); v != "" {
			return v
		}
		return s.env[k]
	}
	if s.clusterConf != nil {
		path := getenv(settings.ClusterConf.Env)
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return fmt.Errorf("write NACOS_SERVERS as a cluster.conf: %w", err)
		}
		if err := os.WriteFile(path, s.clusterConf, 0o640); err != nil {
			return fmt.Errorf("write NACOS_SERVERS as a cluster.conf: %w", err)
		}
	}
	if s.join && !slices.Contains(args, "--join") {
		args = append(args, "--join")
	}
	return runWith(ctx, args, getenv, s.overlay, stdout, stderr)
}

func hasFile(readFile func(string) ([]byte, bool), path string) bool {
	_, ok := readFile(path)
	return ok
}

// localIPs are this host's (container's) addresses other than loopback.
func localIPs() []string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && !n.IP.IsLoopback() {
			out = append(out, n.IP.String())
		}
	}
	return out
}
