package deploy

import (
	"archive/tar"
	"bufio"
	"bytes"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"nacos-lockd/interop/client"
	"nacos-lockd/interop/procs"
	"nacos-lockd/protocol"
)

// podman runs one podman command and returns its stdout.
func podman(t *testing.T, args ...string) string {
	t.Helper()
	out, err := podmanErr(args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func podmanBin() string {
	if bin := os.Getenv("NACOS_LOCKD_PODMAN"); bin != "" {
		return bin
	}
	return "podman"
}

// podmanLogs is a container's stdout (the banner) and stderr (the JSON log).
func podmanLogs(name string) string {
	out, err := exec.Command(podmanBin(), "logs", name).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("podman logs %s: %v\n%s", name, err, out)
	}
	return string(out)
}

func podmanErr(args ...string) (string, error) {
	cmd := exec.Command(podmanBin(), args...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("podman %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String(), nil
}

// TestContainerImage checks the image `make image` built (make image-test
// runs it; NACOS_LOCKD_IMAGE names the image): its configuration and its
// files, then runs it with podman, configured as nacos/nacos-server is (a
// mounted application.properties, MODE and NACOS_SERVER_PORT), takes and
// releases a lock through the published SDK port, stops it with SIGTERM
// and starts it again on the same /data volume.
func TestContainerImage(t *testing.T) {
	image := os.Getenv("NACOS_LOCKD_IMAGE")
	if image == "" {
		t.Skip("NACOS_LOCKD_IMAGE is not set: run `make image-test`")
	}
	runFlags := strings.Fields(os.Getenv("NACOS_LOCKD_PODMAN_RUN_FLAGS"))

	// Configuration: non-root, the volume, the ports, the entrypoint.
	var inspect []struct {
		Config struct {
			User         string
			ExposedPorts map[string]struct{}
			Volumes      map[string]struct{}
			Entrypoint   []string
			StopSignal   string
		}
		Architecture string
	}
	if err := json.Unmarshal([]byte(podman(t, "image", "inspect", image)), &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("image inspect: %v", err)
	}
	cfg := inspect[0].Config
	if cfg.User != "10001:10001" || cfg.StopSignal != "SIGTERM" || strings.Join(cfg.Entrypoint, " ") != "/usr/local/bin/nacos-lockd container" {
		t.Errorf("image config: user %q, stop signal %q, entrypoint %q", cfg.User, cfg.StopSignal, cfg.Entrypoint)
	}
	for _, p := range []string{"8848/tcp", "9848/tcp", "7848/tcp"} {
		if _, ok := cfg.ExposedPorts[p]; !ok {
			t.Errorf("port %s not exposed: %v", p, cfg.ExposedPorts)
		}
	}
	if _, ok := cfg.Volumes["/data"]; !ok || len(cfg.Volumes) != 1 {
		t.Errorf("volumes %v, want /data", cfg.Volumes)
	}

	// Files: exactly these, the binaries static for the image's architecture.
	id := strings.TrimSpace(podman(t, "create", image))
	export := podman(t, "export", id)
	podman(t, "rm", "-v", id) // -v: and the anonymous volume /data
	files := map[string]*tar.Header{}
	tr := tar.NewReader(strings.NewReader(export))
	var lockd []byte
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(h.Name, "/")] = h
		if h.Name == "usr/local/bin/nacos-lockd" {
			lockd, _ = io.ReadAll(tr)
		}
	}
	var names []string
	for n, h := range files {
		if h.Typeflag == tar.TypeReg {
			names = append(names, n)
		}
	}
	if strings.Join(sorted(names), " ") != "etc/group etc/passwd usr/local/bin/nacos-lockctl usr/local/bin/nacos-lockd" {
		t.Errorf("files in the image: %v", sorted(names))
	}
	if d := files["data"]; d == nil || d.Typeflag != tar.TypeDir || d.Uid != 10001 || d.Gid != 10001 {
		t.Errorf("/data: %+v, want a directory of 10001:10001", d)
	}
	if b := files["usr/local/bin/nacos-lockd"]; b == nil || b.Uid != 0 || b.Mode&0o022 != 0 || b.Mode&0o111 == 0 {
		t.Errorf("/usr/local/bin/nacos-lockd: %+v, want root's, executable, not writable by others", b)
	}
	if f, err := elf.NewFile(bytes.NewReader(lockd)); err != nil {
		t.Errorf("nacos-lockd is not ELF: %v", err)
	} else {
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Error("nacos-lockd is dynamically linked (has an interpreter): scratch has no libc")
			}
		}
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[inspect[0].Architecture]
		if f.Machine != want {
			t.Errorf("nacos-lockd is for %v, the image for %s", f.Machine, inspect[0].Architecture)
		}
	}

	// Run it as a Nacos user would: a mounted properties file, MODE, a port
	// by NACOS_SERVER_PORT, a named volume for /data.
	port := procs.FreePorts(t, 1)[0]
	dir := t.TempDir()
	props := filepath.Join(dir, "application.properties")
	if err := os.WriteFile(props, []byte("nacos.lock.default_expire_time=7000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	volume, name := "nacos-lockd-test-"+suffix, "nacos-lockd-test-"+suffix
	t.Cleanup(func() {
		_, _ = podmanErr("rm", "-f", "-v", "-t", "0", name)
		_, _ = podmanErr("volume", "rm", "-f", volume)
	})
	// A fixed host name, as the README tells a container that runs Raft to
	// keep (dragonboat ties its log to the host name, and every run gets a
	// new one unless given); the single-node engine does not need it, which
	// the last start checks.
	hostname := "nacos-lockd-0"
	start := func() {
		t.Helper()
		args := append([]string{"run", "-d", "--name", name, "--hostname", hostname}, runFlags...)
		args = append(args,
			"-p", fmt.Sprintf("127.0.0.1:%d:8849", port), "-p", fmt.Sprintf("127.0.0.1:%d:9849", port+1000),
			"-v", volume+":/data", "-v", props+":/home/nacos/conf/application.properties:ro",
			"-e", "MODE=standalone", "-e", "NACOS_SERVER_PORT=8849", image)
		podman(t, args...)
		deadline := time.Now().Add(60 * time.Second)
		for {
			r, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", port))
			if err == nil {
				r.Body.Close()
				if r.StatusCode == http.StatusOK {
					return
				}
			}
			if time.Now().After(deadline) {
				logs := podmanLogs(name)
				t.Fatalf("container not ready in 60 s: %v\n%s", err, logs)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	stop := func() time.Duration {
		t.Helper()
		t0 := time.Now()
		podman(t, "stop", "-t", "30", name)
		took := time.Since(t0)
		if code := strings.TrimSpace(podman(t, "inspect", "--format", "{{.State.ExitCode}}", name)); code != "0" {
			logs := podmanLogs(name)
			t.Fatalf("exit code %s after SIGTERM:\n%s", code, logs)
		}
		return took
	}
	lockInfo := func(key string) (int, map[string]any) {
		t.Helper()
		return lockInfoOf(t, port, "NON_REENTRANT", key)
	}

	start()
	ctx, cancel := client.Timeout(20 * time.Second)
	defer cancel()
	c, err := client.Dial(ctx, fmt.Sprintf("127.0.0.1:%d", port+1000))
	if err != nil {
		t.Fatal(err)
	}
	li := client.Instance("through-the-container", "NON_REENTRANT", "test", client.Ms(-1), nil)
	if r, err := c.Lock(ctx, protocol.OpAcquire, li); err != nil || !r.Result {
		t.Fatalf("acquire: %+v %v", r, err)
	}
	code, held := lockInfo("through-the-container")
	if code != 200 || held["leaseEndMs"].(float64)-held["acquiredAtMs"].(float64) != 7000 {
		t.Fatalf("held lock %d %v: want the mounted file's default lease of 7000 ms", code, held)
	}
	rel := li
	rel.ExpiredTime = client.Ms(0)
	if r, err := c.Lock(ctx, protocol.OpRelease, rel); err != nil || !r.Result {
		t.Fatalf("release: %+v %v", r, err)
	}
	if code, _ := lockInfo("through-the-container"); code != 404 {
		t.Fatalf("after release: %d, want 404", code)
	}
	// The real Java client, as the README's "Use it from Java" has it.
	javaThroughContainer(t, fmt.Sprintf("127.0.0.1:%d", port), func(key string) int {
		code, _ := lockInfoOf(t, port, "NACOS_LOCK", key)
		return code
	})

	// A lock held across a stop and a start: it lives in the volume.
	ctx, cancel = client.Timeout(20 * time.Second) // the Java example took a while
	defer cancel()
	kept := client.Instance("kept-in-data", "NON_REENTRANT", "test", client.Ms(120000), nil)
	if r, err := c.Lock(ctx, protocol.OpAcquire, kept); err != nil || !r.Result {
		t.Fatalf("acquire: %+v %v", r, err)
	}
	took := stop()
	_ = c.Close()
	logs := podmanLogs(name)
	if !strings.Contains(logs, `"message":"nacos-lockd stopped"`) {
		t.Errorf("no clean stop in the logs:\n%s", logs)
	}
	if !strings.Contains(logs, "ready: single-node node 127.0.0.1:8849") || !strings.Contains(logs, `"data_dir":"/data"`) {
		t.Errorf("not started as configured (banner, /data):\n%s", logs)
	}
	if took > 15*time.Second {
		t.Errorf("SIGTERM stop took %v", took)
	}
	t.Logf("podman stop (SIGTERM) with a client connected: %v", took)

	mount := strings.TrimSpace(podman(t, "volume", "inspect", "--format", "{{.Mountpoint}}", volume))
	if fi, err := os.Stat(filepath.Join(mount, "locks")); err != nil {
		t.Errorf("no lock table in the volume: %v", err)
	} else if uid := ownerOf(fi); uid != 10001 {
		t.Errorf("the volume's files belong to uid %d, want 10001 (the image's user)", uid)
	}

	podman(t, "rm", "-v", name)

	// A single node runs the single-node engine, which does not tie its
	// log to the host name as dragonboat does (a cluster member's start
	// under another name fails and says why: TestExplainRaftStart): the
	// volume starts under another host name too, with its locks.
	hostname = "another-name"
	start()
	if code, m := lockInfo("kept-in-data"); code != 200 || m["owner"] != "test" {
		t.Fatalf("after a restart on the same volume under another host name: %d %v", code, m)
	}
	stop()
	if logs := podmanLogs(name); !strings.Contains(logs, "single-node engine") {
		t.Errorf("the container's single node did not run the single-node engine:\n%s", logs)
	}
}

func sorted(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// lockInfoOf asks the admin API about one lock: 200 and its details, or 404.
func lockInfoOf(t *testing.T, port int, typ, key string) (int, map[string]any) {
	t.Helper()
	r, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/v1/locks/%s/%s", port, typ, key))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(r.Body).Decode(&m)
	return r.StatusCode, m
}

// javaThroughContainer compiles the README's Java example against the
// recommended nacos-client (Maven resolves it and its dependencies, as for
// the interop suite), points it at serverAddr, and checks through
// lockState (the admin API's status for a NACOS_LOCK key) that the lock is
// held inside the critical section and free after the program ends.
func javaThroughContainer(t *testing.T, serverAddr string, lockState func(key string) int) {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)[strings.Index(string(readme), "## Use it from Java"):]
	version := regexp.MustCompile(`<version>([^<]+)</version>`).FindStringSubmatch(section)
	blocks := regexp.MustCompile("(?s)```java\n(.*?)```").FindStringSubmatch(section)
	if version == nil || blocks == nil {
		t.Fatal("README: no Maven version or Java example under \"Use it from Java\"")
	}
	var imports, body []string
	for _, l := range strings.Split(blocks[1], "\n") {
		if strings.HasPrefix(l, "import ") {
			imports = append(imports, l)
		} else if strings.TrimSpace(l) != "" {
			body = append(body, l)
		}
	}
	code := strings.Join(body, "\n")
	// The example as written, pointed at the container, with a critical
	// section that says it is in there and stays a moment.
	for old, repl := range map[string]string{
		`"127.0.0.1:8848"`:       strconv.Quote(serverAddr),
		"/* critical section */": `System.out.println("in critical section"); System.out.flush(); Thread.sleep(1500);`,
	} {
		if !strings.Contains(code, old) {
			t.Fatalf("README's Java example lacks %s:\n%s", old, code)
		}
		code = strings.Replace(code, old, repl, 1)
	}
	key := regexp.MustCompile(`NLockFactory.getLock\("([^"]+)"`).FindStringSubmatch(code)
	if key == nil {
		t.Fatalf("no NLockFactory.getLock(\"key\", ...) in:\n%s", code)
	}
	dir := t.TempDir()
	src := strings.Join(imports, "\n") + "\n\npublic class ReadmeExample {\n    public static void main(String[] args) throws Exception {\n" +
		code + "\n        System.out.println(\"done\");\n        System.exit(0);\n    }\n}\n"
	if err := os.WriteFile(filepath.Join(dir, "ReadmeExample.java"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	pom := fmt.Sprintf(`<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>nacos-lockd</groupId><artifactId>readme-example</artifactId><version>0</version>
<dependencies><dependency><groupId>com.alibaba.nacos</groupId><artifactId>nacos-client</artifactId><version>%s</version></dependency></dependencies>
</project>`, version[1])
	if err := os.WriteFile(filepath.Join(dir, "pom.xml"), []byte(pom), 0o644); err != nil {
		t.Fatal(err)
	}
	cpFile := filepath.Join(dir, "cp.txt")
	if out, err := exec.Command("mvn", "-B", "-q", "-ntp", "-f", filepath.Join(dir, "pom.xml"), "dependency:build-classpath",
		"-Dmdep.outputFile="+cpFile, "-Dmdep.includeScope=runtime").CombinedOutput(); err != nil {
		t.Fatalf("mvn dependency:build-classpath for nacos-client %s: %v\n%s", version[1], err, out)
	}
	cp, err := os.ReadFile(cpFile)
	if err != nil {
		t.Fatal(err)
	}
	classpath := dir + string(os.PathListSeparator) + strings.TrimSpace(string(cp))
	if out, err := exec.Command("javac", "-cp", classpath, "-d", dir, filepath.Join(dir, "ReadmeExample.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac of the README's example: %v\n%s\n%s", err, out, src)
	}
	java := exec.Command("java", "-cp", classpath, "ReadmeExample")
	stdout, err := java.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var javaErr bytes.Buffer
	java.Stderr = &javaErr
	if err := java.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	sawHeld := false
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == "in critical section" {
				sawHeld = lockState(key[1]) == http.StatusOK
			}
		}
		done <- java.Wait()
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the README's Java example against the container: %v\n%s", err, javaErr.String())
		}
	case <-time.After(90 * time.Second):
		_ = java.Process.Kill()
		t.Fatalf("the README's Java example did not finish in 90 s:\n%s", javaErr.String())
	}
	if !sawHeld {
		t.Errorf("NACOS_LOCK %q was not held during the Java example's critical section", key[1])
	}
	if code := lockState(key[1]); code != http.StatusNotFound {
		t.Errorf("NACOS_LOCK %q after the Java example: %d, want 404 (released)", key[1], code)
	}
	t.Logf("nacos-client %s took and released NACOS_LOCK %q through the container", version[1], key[1])
}
