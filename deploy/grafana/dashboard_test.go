package grafana

import (
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/rs/zerolog"

	"nacos-lockd/gateway"
	"nacos-lockd/gateway/admin"
	"nacos-lockd/replica"
	"nacos-lockd/storage"
)

// recorder is a Registerer that remembers what was registered, so that
// vectors without any series yet still name their type.
type recorder struct {
	prometheus.Registerer
	collectors []prometheus.Collector
}

func (r *recorder) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registerer.Register(c)
}

func (r *recorder) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := r.Register(c); err != nil {
			panic(err)
		}
	}
}

// family is one exported metric family.
type family struct {
	typ    string                     // COUNTER, GAUGE, HISTOGRAM, SUMMARY (client_model's names)
	labels map[string]bool            // label names (constant and variable)
	values map[string]map[string]bool // label -> values seen (only for families with series)
}

// seriesOf maps every name a query may use to its family: counters and
// gauges by name; histograms by _bucket, _sum and _count; summaries by
// name, _sum and _count.
func seriesOf(fams map[string]*family) map[string]*family {
	out := map[string]*family{}
	for name, f := range fams {
		switch f.typ {
		case "HISTOGRAM":
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				out[name+s] = f
			}
		case "SUMMARY":
			for _, s := range []string{"", "_sum", "_count"} {
				out[name+s] = f
			}
		default:
			out[name] = f
		}
	}
	return out
}

var (
	descName   = regexp.MustCompile(`fqName: "([^"]+)"`)
	descLabels = regexp.MustCompile(`constLabels: \{(.*)\}, variableLabels: \{([^}]*)\}\}$`)
	constName  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)
)

// exported registers everything the server registers (cmd/nacos-lockd:
// the Go and process collectors, the gateway, the Raft node, the admin
// API) on a test registry and describes every family.
func exported(t *testing.T) map[string]*family {
	t.Helper()
	reg := prometheus.NewRegistry()
	rec := &recorder{Registerer: reg}
	rec.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if _, err := gateway.New(gateway.Config{ListenAddr: "127.0.0.1:0", Metrics: rec}, zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	db, err := storage.Open(storage.Config{Dir: filepath.Join(dir, "locks")})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	raftAddr := l.Addr().String()
	l.Close()
	node, err := replica.Start(replica.RaftConfig{NodeHostDir: filepath.Join(dir, "raft"), RaftAddress: raftAddr, Metrics: rec}, db, nil, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	admin.New(admin.Config{Registerer: rec}, node, zerolog.Nop())

	fams := map[string]*family{}
	for _, c := range rec.collectors {
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			s := d.String()
			m := descName.FindStringSubmatch(s)
			if m == nil {
				t.Fatalf("cannot read %s", s)
			}
			f := &family{typ: "UNTYPED", labels: map[string]bool{}, values: map[string]map[string]bool{}}
			if lm := descLabels.FindStringSubmatch(s); lm != nil {
				for _, cm := range constName.FindAllStringSubmatch(lm[1], -1) {
					f.labels[cm[1]] = true
				}
				for _, v := range strings.Split(lm[2], ",") {
					if v = strings.TrimSuffix(strings.TrimPrefix(v, "c("), ")"); v != "" {
						f.labels[v] = true
					}
				}
			}
			switch c.(type) {
			case *prometheus.CounterVec:
				f.typ = "COUNTER"
			case *prometheus.GaugeVec:
				f.typ = "GAUGE"
			case *prometheus.HistogramVec:
				f.typ = "HISTOGRAM"
			case *prometheus.SummaryVec:
				f.typ = "SUMMARY"
			}
			if old, ok := fams[m[1]]; ok { // one name, several const-label series (nacos_monitor)
				for k := range old.labels {
					f.labels[k] = true
				}
			}
			fams[m[1]] = f
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		f := fams[mf.GetName()]
		if f == nil {
			t.Fatalf("gathered %s, which nothing described", mf.GetName())
		}
		f.typ = mf.GetType().String()
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				f.labels[lp.GetName()] = true
				if f.values[lp.GetName()] == nil {
					f.values[lp.GetName()] = map[string]bool{}
				}
				f.values[lp.GetName()][lp.GetValue()] = true
			}
		}
	}
	for name, f := range fams {
		if f.typ == "UNTYPED" {
			t.Fatalf("%s: type unknown (a vector with no series of a kind this test does not know)", name)
		}
	}
	return fams
}

// query is what a PromQL expression refers to.
type query struct {
	metrics  []string
	labels   []string    // in matchers and in by/without/on/ignoring lists
	matchers [][3]string // label, op, value of every matcher
}

var promqlKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
	"bool": true, "and": true, "or": true, "unless": true, "offset": true, "inf": true, "nan": true,
}

// promqlAggregations may take their by/without clause before the
// parentheses (sum by (op) (...)), so they are not always followed by "(".
var promqlAggregations = map[string]bool{
	"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true, "count": true,
	"count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true,
}

// parsePromQL is a small lexer for the PromQL the dashboard uses: enough
// to find every metric name, label name and label matcher.
func parsePromQL(t *testing.T, expr string) query {
	t.Helper()
	var q query
	ident := func(i int) (string, int) {
		j := i
		for j < len(expr) && (expr[j] == '_' || expr[j] == ':' || (expr[j] >= 'a' && expr[j] <= 'z') || (expr[j] >= 'A' && expr[j] <= 'Z') || (j > i && expr[j] >= '0' && expr[j] <= '9')) {
			j++
		}
		return expr[i:j], j
	}
	skipSpace := func(i int) int {
		for i < len(expr) && (expr[i] == ' ' || expr[i] == '\n' || expr[i] == '\t') {
			i++
		}
		return i
	}
	str := func(i int) (string, int) { // expr[i] is the quote
		quote := expr[i]
		j := i + 1
		for j < len(expr) && expr[j] != quote {
			if expr[j] == '\\' {
				j++
			}
			j++
		}
		if j >= len(expr) {
			t.Fatalf("unterminated string in %q", expr)
		}
		return expr[i+1 : j], j + 1
	}
	labelList := false // the next (...) lists labels
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\n' || c == '\t' || c == ',' || c == ')' || strings.ContainsRune("+-*/^%<>=!", rune(c)):
			i++
		case c >= '0' && c <= '9' || c == '.':
			for i < len(expr) && (expr[i] >= '0' && expr[i] <= '9' || expr[i] == '.' || expr[i] == 'e') {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			_, i = str(i)
		case c == '[': // a range: durations or $__rate_interval
			j := strings.IndexByte(expr[i:], ']')
			if j < 0 {
				t.Fatalf("unterminated range in %q", expr)
			}
			i += j + 1
		case c == '(':
			i++
			if labelList {
				labelList = false
				for {
					i = skipSpace(i)
					if i < len(expr) && expr[i] == ')' {
						i++
						break
					}
					var name string
					name, i = ident(i)
					if name == "" {
						t.Fatalf("bad label list in %q", expr)
					}
					q.labels = append(q.labels, name)
					i = skipSpace(i)
					if i < len(expr) && expr[i] == ',' {
						i++
					}
				}
			}
		case c == '{':
			i++
			for {
				i = skipSpace(i)
				if i < len(expr) && expr[i] == '}' {
					i++
					break
				}
				var name string
				name, i = ident(i)
				i = skipSpace(i)
				op := ""
				for _, o := range []string{"=~", "!~", "!=", "="} {
					if strings.HasPrefix(expr[i:], o) {
						op = o
						break
					}
				}
				if name == "" || op == "" {
					t.Fatalf("bad matcher in %q at %d", expr, i)
				}
				i = skipSpace(i + len(op))
				var val string
				val, i = str(i)
				q.labels = append(q.labels, name)
				q.matchers = append(q.matchers, [3]string{name, op, val})
				i = skipSpace(i)
				if i < len(expr) && expr[i] == ',' {
					i++
				}
			}
		case c == '$':
			_, i = ident(i + 1)
		default:
			name, j := ident(i)
			if name == "" {
				t.Fatalf("unexpected %q in %q", c, expr)
			}
			i = j
			switch k := skipSpace(i); {
			case promqlKeywords[name]:
				labelList = name != "bool" && name != "and" && name != "or" && name != "unless" && name != "offset" && name != "inf" && name != "nan"
			case promqlAggregations[name] || k < len(expr) && expr[k] == '(':
				// an aggregation or a function
			default:
				q.metrics = append(q.metrics, name)
			}
		}
	}
	return q
}

type dashboard struct {
	Title         string  `json:"title"`
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Definition string          `json:"definition"`
			Query      json.RawMessage `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []struct {
		RefID      string `json:"refId"`
		Expr       string `json:"expr"`
		Datasource *struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	b, err := os.ReadFile("nacos-lockd.json")
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	var d dashboard
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("nacos-lockd.json is not valid JSON: %v", err)
	}
	if dec.More() {
		t.Fatal("nacos-lockd.json has data after the dashboard")
	}
	var any map[string]any
	if err := json.Unmarshal(b, &any); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDashboardIsValid(t *testing.T) {
	d := loadDashboard(t)
	if d.Title == "" || d.UID == "" || d.SchemaVersion < 30 || len(d.Panels) == 0 {
		t.Fatalf("dashboard header: %q %q %d, %d panels", d.Title, d.UID, d.SchemaVersion, len(d.Panels))
	}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
	}
	if !vars["datasource"] || !vars["instance"] {
		t.Fatalf("template variables %v: want datasource and instance", vars)
	}
	ids := map[int]bool{}
	titles := map[string]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] || p.ID == 0 {
			t.Errorf("panel %q: id %d missing or used twice", p.Title, p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W < 1 || p.GridPos.X+p.GridPos.W > 24 || p.GridPos.H < 1 {
			t.Errorf("panel %q: grid position %+v", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if titles[p.Title] && p.Title != "Leader" { // "Leader" is a stat and a graph
			t.Errorf("panel title %q used twice", p.Title)
		}
		titles[p.Title] = true
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: no datasource variable or no queries", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.Expr == "" || tg.RefID == "" || refs[tg.RefID] {
				t.Errorf("panel %q: a target without a query, or a refId twice", p.Title)
			}
			refs[tg.RefID] = true
			if !strings.Contains(tg.Expr, `instance=~"$instance"`) {
				t.Errorf("panel %q: %s ignores the node variable", p.Title, tg.Expr)
			}
		}
	}
	// The panels the issue asks for.
	for _, want := range []string{"Request rate by op and result", "Handler latency", "Raft propose latency", "Held locks and waiters",
		"Hand-off, wait and hold time", "How holds end: expiries vs releases", "Connections by node", "Pushes", "Leader",
		"Term and leader changes", "Snapshot size", "Nacos lock counters", "aliveLockCount", "lockHandlerRt"} {
		if !titles[want] {
			t.Errorf("no panel %q", want)
		}
	}
}

// TestDashboardQueriesUseExportedSeries checks every PromQL expression of
// the dashboard against the series the server registers: metric names
// (with the suffixes of their type), label names, and the values of
// equality matchers where the server pre-creates its series.
func TestDashboardQueriesUseExportedSeries(t *testing.T) {
	d := loadDashboard(t)
	fams := exported(t)
	series := seriesOf(fams)
	var exprs []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			exprs = append(exprs, tg.Expr)
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := regexp.MustCompile(`^label_values\((\w+), *(\w+)\)$`).FindStringSubmatch(v.Definition)
		if m == nil {
			t.Fatalf("variable %s: query %q is not label_values(metric, label)", v.Name, v.Definition)
		}
		if f := series[m[1]]; f == nil || (m[2] != "instance" && !f.labels[m[2]]) {
			t.Errorf("variable %s: %s has no label %s", v.Name, m[1], m[2])
		}
	}
	used := map[string]bool{}
	for _, expr := range exprs {
		q := parsePromQL(t, expr)
		if len(q.metrics) == 0 {
			t.Errorf("%s: no metric", expr)
		}
		// Labels every query may use: Prometheus's target labels, and le
		// and quantile where the series have them.
		allowed := map[string]bool{"instance": true, "job": true}
		var refd []*family
		for _, name := range q.metrics {
			f := series[name]
			if f == nil {
				t.Errorf("%s: %s is not a series the server exports", expr, name)
				continue
			}
			used[name] = true
			refd = append(refd, f)
			for l := range f.labels {
				allowed[l] = true
			}
			if strings.HasSuffix(name, "_bucket") {
				allowed["le"] = true
			}
			if f.typ == "SUMMARY" {
				allowed["quantile"] = true
			}
		}
		for _, l := range q.labels {
			if !allowed[l] {
				t.Errorf("%s: no series it reads has a label %q", expr, l)
			}
		}
		for _, m := range q.matchers {
			if m[1] != "=" || m[0] == "instance" || m[0] == "job" {
				continue
			}
			known := false
			for _, f := range refd {
				if vals, ok := f.values[m[0]]; ok && vals[m[2]] {
					known = true
				}
				if _, ok := f.values[m[0]]; !ok {
					known = true // no series yet to check against
				}
			}
			if !known {
				t.Errorf("%s: no series has %s=%q", expr, m[0], m[2])
			}
		}
	}
	// And the other way round: every nacoslockd and nacos series is shown.
	var unused []string
	for name := range fams {
		if !strings.HasPrefix(name, "nacos") {
			continue
		}
		shown := false
		for s, f := range series {
			if f == fams[name] && used[s] {
				shown = true
			}
		}
		if !shown {
			unused = append(unused, name)
		}
	}
	slices.Sort(unused)
	if len(unused) > 0 {
		t.Errorf("series the dashboard does not show: %v", unused)
	}
}

func TestParsePromQL(t *testing.T) {
	q := parsePromQL(t, `histogram_quantile(0.99, sum by (le, op) (rate(x_bucket{instance=~"$i", op!="a,b}"}[$__rate_interval]))) / on(instance) group_left y_total unless z`)
	if !slices.Equal(q.metrics, []string{"x_bucket", "y_total", "z"}) || !slices.Equal(q.labels, []string{"le", "op", "instance", "op", "instance"}) ||
		q.matchers[1] != [3]string{"op", "!=", "a,b}"} {
		t.Fatalf("%+v", q)
	}

}
