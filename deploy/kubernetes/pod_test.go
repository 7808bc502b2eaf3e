package kubernetes

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

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

// TestPodAsTheManifestSays starts the real server the way the plain
// manifest's StatefulSet starts pod 0: the image's entrypoint and the
// container's args and environment, the ConfigMap's files at
// /home/nacos/conf, as uid 10001, in a namespace of its own (host name
// nacos-lockd-0, an /etc/hosts with its pod DNS name as the kubelet writes
// it, a network of its own, so the manifest's ports are free). Alone, one
// of three members: it must find itself in cluster.conf by its host name,
// accept the properties, say that the other pods' names do not resolve
// yet, answer the liveness probe and fail the readiness probe (no quorum),
// and stop within the grace period on SIGTERM after the preStop.
func TestPodAsTheManifestSays(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the pod runs in its own UTS, mount and network namespaces")
	}
	o := load(t, "nacos-lockd.yaml")
	sts, cm := one(t, "StatefulSets", o.statefulSets), one(t, "ConfigMaps", o.configMaps)
	pod := sts.Spec.Template.Spec
	c := one(t, "containers", pod.Containers)
	dir := t.TempDir()
	conf, data := filepath.Join(dir, "conf"), filepath.Join(dir, "data")
	for _, d := range []string{conf, data} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range cm.Data {
		if err := os.WriteFile(filepath.Join(conf, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	uid := *pod.SecurityContext.RunAsUser
	if err := os.Chown(data, int(uid), int(*pod.SecurityContext.FSGroup)); err != nil {
		t.Fatal(err)
	}
	// /data is the claim; here a directory owned as fsGroup makes it, which
	// the pod's user must reach (Go makes test temp dirs 0700).
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	name := sts.Name + "-0"
	fqdn := fmt.Sprintf("%s.%s.%s.svc.cluster.local", name, sts.Spec.ServiceName, sts.Namespace)
	hosts := filepath.Join(dir, "hosts")
	resolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n127.0.0.1 "+fqdn+" "+name+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	bin := filepath.Join(dir, "nacos-lockd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/nacos-lockd")
	build.Dir = filepath.Join("..", "..")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the server: %v\n%s", err, out)
	}
	// The image: ENTRYPOINT ["/usr/local/bin/nacos-lockd", "container"], then the container's args.
	argv := append([]string{"unshare", "--uts", "--mount", "--net", "--propagation", "private", "--", "sh", "-c", `set -e
echo "$1" > /proc/sys/kernel/hostname
ip link set lo up
mount --bind "$2" /etc/hosts
mount --bind "$3" /etc/resolv.conf
mount -t tmpfs none /home
mkdir -p /home/nacos/conf
mount --bind "$4" /home/nacos/conf
shift 4
exec setpriv --reuid "$UID_" --regid "$UID_" --clear-groups "$@"`, "sh", name, hosts, resolv, conf, bin, "container"}, c.Args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "UID_=" + strconv.Itoa(int(uid)), "NACOS_LOCKD_DATA_DIR=" + data}
	for _, e := range c.Env {
		if e.ValueFrom != nil {
			t.Fatalf("env %s comes from %v: not in the plain manifest", e.Name, e.ValueFrom)
		}
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	logPath := filepath.Join(dir, "pod.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("pod log:\n%s", b)
		}
	})
	logged := func(s ...string) bool {
		b, _ := os.ReadFile(logPath)
		for _, line := range strings.Split(string(b), "\n") {
			all := true
			for _, x := range s {
				all = all && strings.Contains(line, x)
			}
			if all {
				return true
			}
		}
		return false
	}
	// A bound only to fail with the log instead of at the test's timeout
	// without it (procs.WaitReady's 90 s).
	deadline := time.Now().Add(90 * time.Second)
	waitLogged := func(s ...string) {
		t.Helper()
		for !logged(s...) {
			select {
			case err := <-exited:
				t.Fatalf("the pod exited (%v) before logging %q", err, s)
			case <-time.After(50 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("the pod did not log %q", s)
			}
		}
	}
	port := c.Ports[0].ContainerPort
	for _, p := range c.Ports {
		if p.Name == "main" {
			port = p.ContainerPort
		}
	}
	self := fmt.Sprintf("%s:%d", fqdn, port-1000)
	waitLogged(`"message":"nacos-lockd starting"`, `"raft":"`+self+`"`)
	for i := 1; i < int(*sts.Spec.Replicas); i++ {
		waitLogged("does not resolve yet", fmt.Sprintf("%s-%d.", sts.Name, i))
	}

	probe := func(p *corev1.Probe) int {
		t.Helper()
		if p.HTTPGet.Port.StrVal != "main" {
			t.Fatalf("probe on port %v, want main", p.HTTPGet.Port)
		}
		url := fmt.Sprintf("%s://127.0.0.1:%d%s", strings.ToLower(string(p.HTTPGet.Scheme)), port, p.HTTPGet.Path)
		for {
			pr := exec.Command("nsenter", "--net=/proc/"+strconv.Itoa(cmd.Process.Pid)+"/ns/net", "--", os.Args[0], "-test.run=^TestProbeHelper$", "-test.count=1")
			pr.Env = append(os.Environ(), "NACOS_LOCKD_PROBE_URL="+url)
			out, err := pr.Output()
			if err != nil {
				t.Fatalf("probe %s: %v %s", url, err, out)
			}
			sc := bufio.NewScanner(strings.NewReader(string(out)))
			for sc.Scan() {
				if s, ok := strings.CutPrefix(sc.Text(), "probe-status "); ok {
					code, _ := strconv.Atoi(s)
					return code
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("probe %s: no answer: %s", url, out)
			}
			time.Sleep(200 * time.Millisecond) // not listening yet: the kubelet retries too
		}
	}
	if code := probe(c.LivenessProbe); code != http.StatusOK {
		t.Fatalf("liveness %s: %d, want 200", c.LivenessProbe.HTTPGet.Path, code)
	}
	if code := probe(c.ReadinessProbe); code != http.StatusServiceUnavailable {
		t.Fatalf("readiness %s with one member of %d: %d, want 503", c.ReadinessProbe.HTTPGet.Path, *sts.Spec.Replicas, code)
	}

	// The kubelet: preStop, then SIGTERM, then SIGKILL at the grace period.
	grace := time.Duration(*pod.TerminationGracePeriodSeconds-c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("SIGTERM: %v", err)
		}
	case <-time.After(grace):
		t.Fatalf("still running %v after SIGTERM: the kubelet would kill it", grace)
	}
}
