package kubernetes

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// objects is one rendering of the chart, decoded.
type objects struct {
	statefulSets    []*appsv1.StatefulSet
	services        []*corev1.Service
	configMaps      []*corev1.ConfigMap
	pdbs            []*policyv1.PodDisruptionBudget
	serviceMonitors []*monitoringv1.ServiceMonitor
	namespaces      map[string]bool
}

// decodeStrict decodes every YAML document of a file into the API type its
// apiVersion and kind name, refusing unknown and duplicate fields (a
// misspelt or misplaced field would otherwise be dropped by the API server
// without a word) and kinds this chart does not make.
func decodeStrict(data []byte, into *objects) error {
	for i, doc := range bytes.Split(data, []byte("\n---")) {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(doc, &head); err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
		if head.Kind == "" && len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue // only comments
		}
		var obj metav1.Object
		switch head.APIVersion + " " + head.Kind {
		case "apps/v1 StatefulSet":
			o := &appsv1.StatefulSet{}
			into.statefulSets, obj = append(into.statefulSets, o), o
		case "v1 Service":
			o := &corev1.Service{}
			into.services, obj = append(into.services, o), o
		case "v1 ConfigMap":
			o := &corev1.ConfigMap{}
			into.configMaps, obj = append(into.configMaps, o), o
		case "policy/v1 PodDisruptionBudget":
			o := &policyv1.PodDisruptionBudget{}
			into.pdbs, obj = append(into.pdbs, o), o
		case "monitoring.coreos.com/v1 ServiceMonitor":
			o := &monitoringv1.ServiceMonitor{}
			into.serviceMonitors, obj = append(into.serviceMonitors, o), o
		default:
			return fmt.Errorf("document %d: unexpected %s %s", i, head.APIVersion, head.Kind)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return fmt.Errorf("document %d (%s): %w", i, head.Kind, err)
		}
		if into.namespaces == nil {
			into.namespaces = map[string]bool{}
		}
		into.namespaces[obj.GetNamespace()] = true
	}
	return nil
}

func stripComments(doc []byte) []byte {
	var out bytes.Buffer
	for _, line := range strings.Split(string(doc), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			out.WriteString(line + "\n")
		}
	}
	return out.Bytes()
}

func load(t *testing.T, files ...string) objects {
	t.Helper()
	var o objects
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := decodeStrict(data, &o); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
	}
	return o
}

func TestDecodeIsStrict(t *testing.T) {
	for name, doc := range map[string]string{
		"unknown field":   "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}\nspec:\n  replica: 3\n",
		"misplaced field": "apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  ports:\n    - port: 80\n      path: /x\n",
		"duplicate field": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\ndata: {a: b}\ndata: {c: d}\n",
		"unknown kind":    "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\n",
	} {
		if err := decodeStrict([]byte(doc), &objects{}); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
}

// chartHash is what make k8s-render stamps into the manifests: sha256 of
// `sha256sum`'s lines for the chart's files in byte order of their paths.
func chartHash(t *testing.T) string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir("chart", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(paths)
	var list bytes.Buffer
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&list, "%x  %s\n", sha256.Sum256(b), p)
	}
	return fmt.Sprintf("%x", sha256.Sum256(list.Bytes()))
}

var renderedFiles = []string{"nacos-lockd.yaml", "servicemonitor.yaml", "testdata/rendered-full.yaml"}

// CI has no helm (it costs minutes to build): the manifests are rendered
// by make k8s-render and committed. This fails when the chart was changed
// after them, so a chart change cannot reach CI unrendered.
func TestManifestsRenderedFromThisChart(t *testing.T) {
	want := chartHash(t)
	re := regexp.MustCompile(`\(chart sha256 ([0-9a-f]{64})\)`)
	for _, f := range renderedFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		m := re.FindSubmatch(data)
		if m == nil || string(m[1]) != want {
			t.Errorf("%s was not rendered from the chart as it is (chart sha256 %s): run make k8s-render", f, want)
		}
	}
}

// setup is what a rendering was made with.
type setup struct {
	namespace, domain string
	replicas, port    int
	auth, tls         bool
	serviceMonitor    bool
}

func TestPlainManifests(t *testing.T) {
	checkSet(t, load(t, "nacos-lockd.yaml", "servicemonitor.yaml"),
		setup{namespace: "nacos-lockd", domain: "cluster.local", replicas: 3, port: 8848, serviceMonitor: true})
}

func TestChartEverythingOn(t *testing.T) {
	checkSet(t, load(t, "testdata/rendered-full.yaml"),
		setup{namespace: "prod", domain: "k8s.example", replicas: 5, port: 18848, auth: true, tls: true, serviceMonitor: true})
}

// properties reads the Java properties subset the chart writes: key=value.
func properties(t *testing.T, text string) map[string]string {
	t.Helper()
	out := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("application.properties: %q is not key=value", line)
		}
		if _, dup := out[k]; dup {
			t.Fatalf("application.properties: %s set twice", k)
		}
		out[k] = v
	}
	return out
}

func one[T any](t *testing.T, what string, xs []T) T {
	t.Helper()
	if len(xs) != 1 {
		t.Fatalf("%d %s, want 1", len(xs), what)
	}
	return xs[0]
}

func selects(t *testing.T, what string, sel map[string]string, podLabels map[string]string) {
	t.Helper()
	if len(sel) == 0 || !labels.SelectorFromSet(sel).Matches(labels.Set(podLabels)) {
		t.Fatalf("%s selector %v does not select the pods %v", what, sel, podLabels)
	}
}

func checkSet(t *testing.T, o objects, s setup) {
	t.Helper()
	if len(o.namespaces) != 1 || !o.namespaces[s.namespace] {
		t.Fatalf("namespaces %v, want all in %s (cluster.conf names carry it)", o.namespaces, s.namespace)
	}
	sts := one(t, "StatefulSets", o.statefulSets)
	cm := one(t, "ConfigMaps", o.configMaps)
	pdb := one(t, "PodDisruptionBudgets", o.pdbs)
	if len(o.services) != 2 {
		t.Fatalf("%d Services, want a headless and a client one", len(o.services))
	}
	pod := sts.Spec.Template
	podLabels := pod.Labels
	if sts.Spec.Replicas == nil || int(*sts.Spec.Replicas) != s.replicas {
		t.Fatalf("replicas %v, want %d", sts.Spec.Replicas, s.replicas)
	}
	// A member is ready only with a quorum: OrderedReady would wait for pod 0 forever.
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Fatalf("podManagementPolicy %q, want Parallel", sts.Spec.PodManagementPolicy)
	}
	selects(t, "StatefulSet", sts.Spec.Selector.MatchLabels, podLabels)

	var headless, client *corev1.Service
	for _, svc := range o.services {
		selects(t, "Service "+svc.Name, svc.Spec.Selector, podLabels)
		if svc.Spec.ClusterIP == corev1.ClusterIPNone {
			headless = svc
		} else {
			client = svc
		}
	}
	if headless == nil || client == nil || sts.Spec.ServiceName != headless.Name {
		t.Fatalf("want a headless Service named by the StatefulSet's serviceName %q and a client Service", sts.Spec.ServiceName)
	}
	// Names must resolve before readiness, which needs them (a quorum).
	if !headless.Spec.PublishNotReadyAddresses {
		t.Fatal("the headless Service does not publish not-ready addresses: members could never resolve each other to become ready")
	}

	// cluster.conf: one pod DNS name per replica, main port; each pod
	// finds its entry by its host name (the pod name), the first label.
	var want []string
	for i := range s.replicas {
		want = append(want, fmt.Sprintf("%s-%d.%s.%s.svc.%s:%d", sts.Name, i, headless.Name, s.namespace, s.domain, s.port))
	}
	var got []string
	for _, line := range strings.Split(cm.Data["cluster.conf"], "\n") {
		if line = strings.TrimSpace(line); line != "" && line[0] != '#' {
			got = append(got, line)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("cluster.conf %q, want %q", got, want)
	}
	props := properties(t, cm.Data["application.properties"])
	if props["server.port"] != strconv.Itoa(s.port) {
		t.Fatalf("server.port %q, want %d", props["server.port"], s.port)
	}

	c := one(t, "containers", pod.Spec.Containers)
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["main"] != int32(s.port) || ports["sdk"] != int32(s.port+1000) || ports["raft"] != int32(s.port-1000) {
		t.Fatalf("container ports %v, want main %d, sdk main+1000, raft main-1000 (the server derives them)", ports, s.port)
	}
	for _, svc := range o.services {
		for _, p := range svc.Spec.Ports {
			if ports[p.TargetPort.StrVal] != p.Port {
				t.Fatalf("Service %s port %s: %d -> %q, not a container port of that number", svc.Name, p.Name, p.Port, p.TargetPort.StrVal)
			}
		}
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	if env["MODE"].Value != "cluster" {
		t.Fatalf("MODE %q, want cluster", env["MODE"].Value)
	}

	// The image's entrypoint reads /home/nacos/conf/{application.properties,cluster.conf}
	// and keeps its state in /data, as uid 10001.
	mounts := map[string]corev1.VolumeMount{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		volumes[v.Name] = v
	}
	if v := volumes[mounts["/home/nacos/conf"].Name]; v.ConfigMap == nil || v.ConfigMap.Name != cm.Name {
		t.Fatalf("/home/nacos/conf is not the ConfigMap %s", cm.Name)
	}
	pvc := one(t, "volumeClaimTemplates", sts.Spec.VolumeClaimTemplates)
	if mounts["/data"].Name != pvc.Name || pvc.Spec.Resources.Requests.Storage().IsZero() {
		t.Fatalf("/data is not the claim template %s with a size", pvc.Name)
	}
	sc := pod.Spec.SecurityContext
	if sc == nil || sc.RunAsUser == nil || *sc.RunAsUser != 10001 || sc.FSGroup == nil || *sc.FSGroup != 10001 {
		t.Fatal("the pod does not run as the image's uid 10001 with fsGroup 10001 (who owns /data)")
	}

	// Probes on the main port: ready = Raft leader and caught up, alive = up.
	scheme := corev1.URISchemeHTTP
	if props["server.ssl.enabled"] == "true" {
		scheme = corev1.URISchemeHTTPS
	}
	for name, p := range map[string]*corev1.Probe{"/readyz": c.ReadinessProbe, "/healthz": c.LivenessProbe} {
		if p == nil || p.HTTPGet == nil || p.HTTPGet.Path != name || p.HTTPGet.Port.StrVal != "main" || p.HTTPGet.Scheme != scheme {
			t.Fatalf("probe %s: %+v, want GET %s on port main, %s", name, p, name, scheme)
		}
	}
	// preStop lets the endpoints drop the pod; then SIGTERM's graceful stop
	// (leader hand-over, clients moved) needs up to ~5 s; the image asks
	// for 30 s before SIGKILL.
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds <= 0 {
		t.Fatal("no preStop sleep")
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g == nil || *g < c.Lifecycle.PreStop.Sleep.Seconds+30 {
		t.Fatalf("terminationGracePeriodSeconds %v leaves the graceful stop less than 30 s after a %d s preStop", g, c.Lifecycle.PreStop.Sleep.Seconds)
	}
	req := c.Resources.Requests
	if req.Cpu().IsZero() || req.Memory().IsZero() {
		t.Fatalf("resource requests %v: want cpu and memory", req)
	}
	if lim, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && lim.Cmp(*req.Memory()) < 0 {
		t.Fatal("memory limit below the request")
	}

	// A quorum stays up through voluntary disruptions.
	selects(t, "PodDisruptionBudget", pdb.Spec.Selector.MatchLabels, podLabels)
	if pdb.Spec.MinAvailable == nil || pdb.Spec.MinAvailable.IntValue() != s.replicas/2+1 {
		t.Fatalf("PodDisruptionBudget minAvailable %v, want a quorum of %d: %d", pdb.Spec.MinAvailable, s.replicas, s.replicas/2+1)
	}

	secretFile := func(path string) {
		t.Helper()
		dir := filepath.Dir(path)
		v := volumes[mounts[dir].Name]
		if v.Secret == nil || !mounts[dir].ReadOnly {
			t.Fatalf("%s: %s is not a read-only Secret mount", path, dir)
		}
		if len(v.Secret.Items) > 0 && !slices.ContainsFunc(v.Secret.Items, func(k corev1.KeyToPath) bool { return k.Path == filepath.Base(path) }) {
			t.Fatalf("%s: the Secret volume does not project %s", path, filepath.Base(path))
		}
	}
	if s.auth {
		if props["nacos.core.auth.enabled"] != "true" {
			t.Fatal("auth on, but not in application.properties")
		}
		secretFile(props["nacos.lock.auth.users_file"])
		for _, k := range []string{"NACOS_AUTH_TOKEN", "NACOS_AUTH_IDENTITY_KEY", "NACOS_AUTH_IDENTITY_VALUE"} {
			if e := env[k]; e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				t.Fatalf("%s is not taken from the auth Secret", k)
			}
		}
	} else if _, on := props["nacos.core.auth.enabled"]; on {
		t.Fatal("auth off, but set in application.properties")
	}
	if s.tls {
		for _, k := range []string{"nacos.remote.server.rpc.tls.certChainFile", "nacos.remote.server.rpc.tls.certPrivateKey",
			"nacos.remote.server.rpc.tls.trustCollectionCertFile", "server.ssl.certificate", "server.ssl.certificate-private-key"} {
			secretFile(props[k])
		}
		if props["nacos.remote.server.rpc.tls.enableTls"] != "true" || scheme != corev1.URISchemeHTTPS {
			t.Fatal("TLS on, but not for both ports")
		}
	}

	if !s.serviceMonitor {
		return
	}
	sm := one(t, "ServiceMonitors", o.serviceMonitors)
	sel, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	// Every member once: through the headless Service, not the client one too.
	if !sel.Matches(labels.Set(headless.Labels)) || sel.Matches(labels.Set(client.Labels)) {
		t.Fatalf("ServiceMonitor selector %v: want the headless Service only", sel)
	}
	ep := one(t, "ServiceMonitor endpoints", sm.Spec.Endpoints)
	if ep.Port != "main" || ep.Path != "/metrics" || !strings.EqualFold(string(ptrOr(ep.Scheme)), string(scheme)) {
		t.Fatalf("ServiceMonitor endpoint %+v, want /metrics on main, %s", ep, scheme)
	}
}

func ptrOr[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
