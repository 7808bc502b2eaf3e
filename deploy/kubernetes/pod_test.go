package kubernetes

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestProbeHelper is not a test: TestPodAsTheManifestSays runs this test
// binary inside a pod's network namespace to make the kubelet's probes
// (an HTTP GET whose status it prints).
func TestProbeHelper(t *testing.T) {
	url := os.Getenv("NACOS_LOCKD_PROBE_URL")
	if url == "" {
		t.Skip("helper process only")
	}
	resp, err := http.Get(url)
	if err != nil {
		fmt.Println("probe-error", err)
		return
	}
	resp.Body.Close()
	fmt.Println("probe-status", resp.StatusCode)
}

var (
	serverOnce sync.Once
	serverBin  string
	serverErr  error
)

// server builds the real nacos-lockd of the repository (../..) once.
func server(t *testing.T) string {
	t.Helper()
	serverOnce.Do(func() {
		dir, err := os.MkdirTemp("", "nacos-lockd-k8s-test")
		if err != nil {
			serverErr = err
			return
		}
		if err := os.Chmod(dir, 0o755); err != nil { // the pods' uid runs it
			serverErr = err
			return
		}
		serverBin = filepath.Join(dir, "nacos-lockd")
		build := exec.Command("go", "build", "-o", serverBin, "./cmd/nacos-lockd")
		build.Dir = filepath.Join("..", "..")
		if out, err := build.CombinedOutput(); err != nil {
			serverErr = fmt.Errorf("build the server: %v\n%s", err, out)
		}
	})
	if serverErr != nil {
		t.Fatal(serverErr)
	}
	return serverBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if serverBin != "" {
		os.RemoveAll(filepath.Dir(serverBin))
	}
	os.Exit(code)
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: pods run in their own UTS, mount and network namespaces")
	}
}

// manifest is the plain manifest's StatefulSet, its ConfigMap and its container.
type manifest struct {
	sts *appsv1.StatefulSet
	cm  *corev1.ConfigMap
	c   corev1.Container
}

func plainManifest(t *testing.T) manifest {
	t.Helper()
	o := load(t, "nacos-lockd.yaml")
	sts := one(t, "StatefulSets", o.statefulSets)
	return manifest{sts, one(t, "ConfigMaps", o.configMaps), one(t, "containers", sts.Spec.Template.Spec.Containers)}
}

func (m manifest) podName(i int) string { return fmt.Sprintf("%s-%d", m.sts.Name, i) }

func (m manifest) fqdn(i int) string {
	return fmt.Sprintf("%s.%s.%s.svc.cluster.local", m.podName(i), m.sts.Spec.ServiceName, m.sts.Namespace)
}

func (m manifest) port(name string) int {
	for _, p := range m.c.Ports {
		if p.Name == name {
			return int(p.ContainerPort)
		}
	}
	return 0
}

// pod is one running pod's process.
type pod struct {
	t       *testing.T
	cmd     *exec.Cmd
	exited  chan error
	logPath string
}

// startPod starts the real server the way the StatefulSet starts pod i:
// the image's entrypoint (`nacos-lockd container`) with the container's
// args and environment, the ConfigMap's files at /home/nacos/conf, as the
// pod's uid, under the pod's host name and with an /etc/hosts that says
// what its DNS would. netPrefix runs it in a network namespace (ip netns
// exec); nil gives it one of its own with loopback only.
func startPod(t *testing.T, m manifest, i int, hosts string, netPrefix []string) *pod {
	t.Helper()
	podSpec := m.sts.Spec.Template.Spec
	dir := t.TempDir()
	conf, data := filepath.Join(dir, "conf"), filepath.Join(dir, "data")
	for _, d := range []string{conf, data} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range m.cm.Data {
		if err := os.WriteFile(filepath.Join(conf, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// /data is the claim; here a directory owned as fsGroup makes it, which
	// the pod's user must reach (Go makes test temp dirs 0700).
	uid := *podSpec.SecurityContext.RunAsUser
	if err := os.Chown(data, int(uid), int(*podSpec.SecurityContext.FSGroup)); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	hostsFile, resolv := filepath.Join(dir, "hosts"), filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(hostsFile, []byte(hosts), 0o644); err != nil {
		t.Fatal(err)
	}
	// A name missing from the hosts file fails at once instead of waiting
	// on this machine's DNS.
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ns := []string{"unshare", "--uts", "--mount", "--propagation", "private"}
	lo := ""
	if netPrefix == nil {
		ns = append(ns, "--net")
		lo = "ip link set lo up\n"
	}
	argv := append(append(append([]string(nil), netPrefix...), ns...), "--", "sh", "-c", `set -e
echo "$1" > /proc/sys/kernel/hostname
`+lo+`mount --bind "$2" /etc/hosts
mount --bind "$3" /etc/resolv.conf
mount -t tmpfs none /home
mkdir -p /home/nacos/conf
mount --bind "$4" /home/nacos/conf
shift 4
exec setpriv --reuid "$UID_" --regid "$UID_" --clear-groups "$@"`, "sh", m.podName(i), hostsFile, resolv, conf, server(t), "container")
	argv = append(argv, m.c.Args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "UID_=" + strconv.Itoa(int(uid)), "NACOS_LOCKD_DATA_DIR=" + data}
	for _, e := range m.c.Env {
		if e.ValueFrom != nil {
			t.Fatalf("env %s comes from %v: not in the plain manifest", e.Name, e.ValueFrom)
		}
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	p := &pod{t: t, cmd: cmd, exited: make(chan error, 1), logPath: filepath.Join(dir, "pod.log")}
	logFile, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.exited <- cmd.Wait(); logFile.Close() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(p.logPath)
			t.Logf("log of %s:\n%s", m.podName(i), b)
		}
	})
	return p
}

func (p *pod) logged(s ...string) bool {
	b, _ := os.ReadFile(p.logPath)
	for _, line := range strings.Split(string(b), "\n") {
		if !slices.ContainsFunc(s, func(x string) bool { return !strings.Contains(line, x) }) {
			return true
		}
	}
	return false
}

// until polls cond until it holds, failing if the pod exits first. The
// bound only makes a failure show the log instead of hitting the test's
// timeout without it (as procs.WaitReady's 90 s).
func (p *pod) until(what string, cond func() bool) {
	p.t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !cond() {
		select {
		case err := <-p.exited:
			p.exited <- err
			p.t.Fatalf("the pod exited (%v) before %s", err, what)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("no %s within 90 s", what)
		}
	}
}

// term is the kubelet's stop after preStop: SIGTERM, SIGKILL at the end of
// the grace period.
func (p *pod) term(m manifest) {
	p.t.Helper()
	grace := time.Duration(*m.sts.Spec.Template.Spec.TerminationGracePeriodSeconds-m.c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.t.Fatal(err)
	}
	select {
	case err := <-p.exited:
		if err != nil {
			p.t.Fatalf("SIGTERM: %v", err)
		}
	case <-time.After(grace):
		p.t.Fatalf("still running %v after SIGTERM: the kubelet would kill it", grace)
	}
}

// TestPodAsTheManifestSays runs pod 0 alone, one of three members, in a
// network of its own: it must find itself in cluster.conf by its host
// name, accept the properties, say that the other pods' names do not
// resolve yet, answer the liveness probe and fail the readiness probe (no
// quorum), and stop within the grace period.
func TestPodAsTheManifestSays(t *testing.T) {
	needRoot(t)
	m := plainManifest(t)
	p := startPod(t, m, 0, "127.0.0.1 localhost\n127.0.0.1 "+m.fqdn(0)+" "+m.podName(0)+"\n", nil)
	self := fmt.Sprintf(`"raft":"%s:%d"`, m.fqdn(0), m.port("raft"))
	p.until("the start line for pod 0", func() bool { return p.logged(`"message":"nacos-lockd starting"`, self) })
	for i := 1; i < int(*m.sts.Spec.Replicas); i++ {
		p.until("a line saying pod "+strconv.Itoa(i)+" does not resolve", func() bool { return p.logged("does not resolve yet", m.podName(i)+".") })
	}
	probe := func(pr *corev1.Probe) int {
		t.Helper()
		if pr.HTTPGet.Port.StrVal != "main" {
			t.Fatalf("probe on port %v, want main", pr.HTTPGet.Port)
		}
		url := fmt.Sprintf("%s://127.0.0.1:%d%s", strings.ToLower(string(pr.HTTPGet.Scheme)), m.port("main"), pr.HTTPGet.Path)
		code := 0
		p.until("an answer to "+url, func() bool {
			c := exec.Command("nsenter", "--net=/proc/"+strconv.Itoa(p.cmd.Process.Pid)+"/ns/net", "--", os.Args[0], "-test.run=^TestProbeHelper$", "-test.count=1")
			c.Env = append(os.Environ(), "NACOS_LOCKD_PROBE_URL="+url)
			out, err := c.Output()
			if err != nil {
				t.Fatalf("probe %s: %v %s", url, err, out)
			}
			sc := bufio.NewScanner(strings.NewReader(string(out)))
			for sc.Scan() {
				if s, ok := strings.CutPrefix(sc.Text(), "probe-status "); ok {
					code, _ = strconv.Atoi(s)
					return true
				}
			}
			return false // not listening yet: the kubelet retries too
		})
		return code
	}
	if code := probe(m.c.LivenessProbe); code != http.StatusOK {
		t.Fatalf("liveness %s: %d, want 200", m.c.LivenessProbe.HTTPGet.Path, code)
	}
	if code := probe(m.c.ReadinessProbe); code != http.StatusServiceUnavailable {
		t.Fatalf("readiness %s with one member of %d: %d, want 503", m.c.ReadinessProbe.HTTPGet.Path, *m.sts.Spec.Replicas, code)
	}
	p.term(m)
}

// podNetwork is a bridge with one network namespace per pod, each with the
// same ports (8848, ...) at its own IP, as pods have; the test reaches
// every pod from the root namespace through the bridge.
type podNetwork struct {
	prefix, subnet string
	pods           int
}

func ipcmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func newPodNetwork(t *testing.T, pods int) *podNetwork {
	t.Helper()
	n := &podNetwork{prefix: fmt.Sprintf("lk%05x", rand.IntN(1<<20)), subnet: fmt.Sprintf("10.%d.%d.", 150+rand.IntN(50), rand.IntN(250)), pods: pods}
	br := n.prefix + "br"
	t.Cleanup(func() {
		for i := range pods {
			_ = exec.Command("ip", "netns", "del", n.ns(i)).Run()
		}
		_ = exec.Command("ip", "link", "del", br).Run()
	})
	ipcmd(t, "link", "add", br, "type", "bridge")
	ipcmd(t, "addr", "add", n.subnet+"254/24", "dev", br)
	ipcmd(t, "link", "set", br, "up")
	for i := range pods {
		veth := fmt.Sprintf("%sv%d", n.prefix, i)
		ipcmd(t, "netns", "add", n.ns(i))
		ipcmd(t, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", n.ns(i))
		ipcmd(t, "link", "set", veth, "master", br, "up")
		ipcmd(t, "-n", n.ns(i), "addr", "add", n.ip(i)+"/24", "dev", "eth0")
		ipcmd(t, "-n", n.ns(i), "link", "set", "eth0", "up")
		ipcmd(t, "-n", n.ns(i), "link", "set", "lo", "up")
	}
	return n
}

func (n *podNetwork) ns(i int) string { return fmt.Sprintf("%sn%d", n.prefix, i) }
func (n *podNetwork) ip(i int) string { return fmt.Sprintf("%s%d", n.subnet, i+1) }

// TestStatefulSetOfThree runs the plain manifest's three pods, each in its
// own network namespace at its own IP with the manifest's ports, under
// its pod name, with the hosts file the kubelet writes (its own FQDN) and
// the other pods' names as the headless Service publishes them. They must
// form the cluster through their DNS names and pass the readiness probe;
// a stopped member must stop within its grace period while the others
// stay ready.
func TestStatefulSetOfThree(t *testing.T) {
	needRoot(t)
	m := plainManifest(t)
	n := int(*m.sts.Spec.Replicas)
	net := newPodNetwork(t, n)
	var hosts strings.Builder
	hosts.WriteString("127.0.0.1 localhost\n")
	for i := range n {
		fmt.Fprintf(&hosts, "%s %s %s\n", net.ip(i), m.fqdn(i), m.podName(i))
	}
	var pods []*pod
	for i := range n {
		pods = append(pods, startPod(t, m, i, hosts.String(), []string{"ip", "netns", "exec", net.ns(i)}))
	}
	get := func(i int, path string) (int, []byte) {
		client := http.Client{Timeout: 5 * time.Second}
		resp, err := client.Get(fmt.Sprintf("http://%s:%d%s", net.ip(i), m.port("main"), path))
		if err != nil {
			return 0, nil
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, _ = bufio.NewReader(resp.Body).WriteTo(&b)
		return resp.StatusCode, []byte(b.String())
	}
	ready := func(i int) func() bool {
		return func() bool { code, _ := get(i, m.c.ReadinessProbe.HTTPGet.Path); return code == http.StatusOK }
	}
	for i, p := range pods {
		p.until(m.podName(i)+" ready", ready(i))
	}
	code, body := get(0, "/v1/cluster/members")
	var members struct {
		Members []struct {
			Address string `json:"address"`
		} `json:"members"`
	}
	if err := json.Unmarshal(body, &members); code != http.StatusOK || err != nil {
		t.Fatalf("members: %d %v %s", code, err, body)
	}
	var got, want []string
	for _, mb := range members.Members {
		got = append(got, mb.Address)
	}
	for i := range n {
		want = append(want, fmt.Sprintf("%s:%d", m.fqdn(i), m.port("main")))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("members %v, want the pods' DNS names %v", got, want)
	}
	pods[n-1].term(m)
	for i := range n - 1 {
		pods[i].until(m.podName(i)+" ready with a member stopped", ready(i))
	}
}
