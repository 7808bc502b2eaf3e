package kubernetes

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/strvals"
)

// helm itself, as a library: `helm lint --strict` and `helm template` run
// here in CI, without building the helm command (its dependencies cost
// minutes to compile; these packages cost about one). The Makefile's
// k8s-render uses the real helm binary with the same arguments.

const (
	chartDir    = "chart/nacos-lockd"
	kubeVersion = "v1.32.0" // KUBE_VERSION in the Makefile
)

var kubeVer = &chartutil.KubeVersion{Version: kubeVersion, Major: "1", Minor: "32"}

// render is one `helm template` invocation of the Makefile's k8s-render.
type render struct {
	file      string // committed output
	release   string
	namespace string
	values    string // -f, relative to this directory
	set       string // --set
	showOnly  string // --show-only
}

var renders = []render{
	{file: "nacos-lockd.yaml", release: "nacos-lockd", namespace: "nacos-lockd"},
	{file: "servicemonitor.yaml", release: "nacos-lockd", namespace: "nacos-lockd", set: "serviceMonitor.enabled=true", showOnly: "templates/servicemonitor.yaml"},
	{file: "testdata/rendered-full.yaml", release: "locks", namespace: "prod", values: "testdata/values-full.yaml"},
}

func (r render) userValues(t *testing.T) map[string]any {
	t.Helper()
	vals := map[string]any{}
	if r.values != "" {
		v, err := chartutil.ReadValuesFile(r.values)
		if err != nil {
			t.Fatal(err)
		}
		vals = v.AsMap()
	}
	if r.set != "" {
		if err := strvals.ParseInto(r.set, vals); err != nil {
			t.Fatal(err)
		}
	}
	return vals
}

// TestChartLintsStrict is `helm lint --strict`, with the default values and
// with the full example: any warning or error fails.
func TestChartLintsStrict(t *testing.T) {
	for _, values := range []string{"", "testdata/values-full.yaml"} {
		vals := map[string]any{}
		if values != "" {
			v, err := chartutil.ReadValuesFile(values)
			if err != nil {
				t.Fatal(err)
			}
			vals = v.AsMap()
		}
		res := lint.AllWithKubeVersion(chartDir, vals, "nacos-lockd", kubeVer)
		for _, m := range res.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("values %q: %s", values, m)
			} else {
				t.Logf("values %q: %s", values, m)
			}
		}
	}
}

// TestCommittedManifestsAreTheChartRendered is `helm template` for each of
// k8s-render's outputs: the committed file must be exactly what the chart
// renders now (below its generated header).
func TestCommittedManifestsAreTheChartRendered(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range renders {
		t.Run(r.file, func(t *testing.T) {
			got, err := helmTemplate(ch, r, r.userValues(t))
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(r.file)
			if err != nil {
				t.Fatal(err)
			}
			want := withoutHeader(data)
			if got != want {
				t.Errorf("%s is not the chart rendered now: run make k8s-render\n%s", r.file, firstDiff(want, got))
			}
		})
	}
}

// helmTemplate renders the chart as `helm template` prints it: the
// manifests in install order, each under a "# Source:" line.
func helmTemplate(ch *chart.Chart, r render, vals map[string]any) (string, error) {
	caps := chartutil.DefaultCapabilities.Copy()
	caps.KubeVersion = *kubeVer
	opts := chartutil.ReleaseOptions{Name: r.release, Namespace: r.namespace, Revision: 1, IsInstall: true}
	top, err := chartutil.ToRenderValues(ch, vals, opts, caps)
	if err != nil {
		return "", fmt.Errorf("values: %w", err)
	}
	files, err := engine.Render(ch, top)
	if err != nil {
		return "", fmt.Errorf("render: %w", err)
	}
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			delete(files, name)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, caps.APIVersions, releaseutil.InstallOrder)
	if err != nil {
		return "", fmt.Errorf("sort: %w", err)
	}
	if len(hooks) > 0 {
		return "", fmt.Errorf("the chart has %d hooks; this test prints none", len(hooks))
	}
	var b strings.Builder
	for _, m := range manifests {
		if r.showOnly != "" && m.Name != filepath.Join(ch.Name(), r.showOnly) {
			continue
		}
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	return b.String(), nil
}

// withoutHeader drops k8s-render's comment lines before the first document.
func withoutHeader(data []byte) string {
	for bytes.HasPrefix(data, []byte("#")) {
		i := bytes.IndexByte(data, '\n')
		if i < 0 {
			return ""
		}
		data = data[i+1:]
	}
	return string(data)
}

func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  committed: %q\n  rendered:  %q", i+1, wl, gl)
		}
	}
	return "(lengths differ)"
}
