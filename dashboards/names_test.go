package dashboards

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/postsedge/caddy-posts/metrics"
)

// A family's kind says which series names it exports: a histogram's _bucket, _sum and _count.
const (
	plain     = "plain" // a counter or a gauge: its own name
	histogram = "histogram"
	summary   = "summary"
)

// seriesNames are the names a query may use of the family name of kind.
func seriesNames(name, kind string) []string {
	switch kind {
	case histogram:
		return []string{name + "_bucket", name + "_sum", name + "_count"}
	case summary:
		return []string{name, name + "_sum", name + "_count"}
	}
	return []string{name}
}

// optsType is the type of the options that name a metric family, by the kind they make.
var optsType = map[string]string{
	"CounterOpts": plain, "GaugeOpts": plain, "HistogramOpts": histogram, "SummaryOpts": summary,
}

// definedFamilies reads the metric families that the Go file at path defines, name to kind:
// every prometheus.*Opts literal, named from its Namespace, Subsystem and Name, each a string
// literal or a string constant of the file.
func definedFamilies(t *testing.T, path string) map[string]string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	consts := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		if decl, ok := n.(*ast.GenDecl); ok && decl.Tok == token.CONST {
			for _, spec := range decl.Specs {
				spec := spec.(*ast.ValueSpec)
				for i, name := range spec.Names {
					if i < len(spec.Values) {
						if lit, ok := spec.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
							consts[name.Name], _ = strconv.Unquote(lit.Value)
						}
					}
				}
			}
		}
		return true
	})
	families := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.CompositeLit)
		if !ok {
			return true
		}
		sel, ok := lit.Type.(*ast.SelectorExpr)
		if !ok || optsType[sel.Sel.Name] == "" {
			return true
		}
		if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "prometheus" {
			return true
		}
		parts := map[string]string{}
		for _, elt := range lit.Elts {
			kv, ok := elt.(*ast.KeyValueExpr)
			if !ok {
				t.Fatalf("%s: prometheus.%s without field names; this test cannot read it", fset.Position(lit.Pos()), sel.Sel.Name)
			}
			key := kv.Key.(*ast.Ident).Name // the key of a struct literal's field is its name
			if key != "Namespace" && key != "Subsystem" && key != "Name" {
				continue
			}
			switch v := kv.Value.(type) {
			case *ast.BasicLit:
				parts[key], _ = strconv.Unquote(v.Value)
			case *ast.Ident:
				value, ok := consts[v.Name]
				if !ok {
					t.Fatalf("%s: %s is %s, not a string constant of the file; this test cannot read it", fset.Position(v.Pos()), key, v.Name)
				}
				parts[key] = value
			default:
				t.Fatalf("%s: %s is not a string constant; this test cannot read it", fset.Position(kv.Pos()), key)
			}
		}
		if parts["Name"] == "" {
			t.Fatalf("%s: a metric without a Name this test can read", fset.Position(lit.Pos()))
		}
		families[prometheus.BuildFQName(parts["Namespace"], parts["Subsystem"], parts["Name"])] = optsType[sel.Sel.Name]
		return true
	})
	return families
}

// registrations counts the collectors registered with it.
type registrations int

func (r *registrations) Register(prometheus.Collector) error     { *r++; return nil }
func (r *registrations) MustRegister(cs ...prometheus.Collector) { *r += registrations(len(cs)) }
func (r *registrations) Unregister(prometheus.Collector) bool    { return false }

// ourFamilies are the families of package metrics, read from its source: every one it
// registers, or the test fails.
func ourFamilies(t *testing.T) map[string]string {
	t.Helper()
	families := definedFamilies(t, filepath.Join("..", "metrics", "metrics.go"))
	var registered registrations
	if err := metrics.Register(&registered); err != nil {
		t.Fatal(err)
	}
	if int(registered) != len(families) {
		t.Fatalf("metrics.Register registers %d collectors, but metrics/metrics.go names %d: a collector is made in a way this test cannot read", registered, len(families))
	}
	return families
}

// caddyFamilies are the caddy_http_* families of the Caddy this module builds with.
func caddyFamilies(t *testing.T) map[string]string {
	t.Helper()
	dir, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/caddyserver/caddy/v2").Output()
	if err != nil {
		t.Fatalf("go list cannot find Caddy's source: %v", err)
	}
	return definedFamilies(t, filepath.Join(strings.TrimSpace(string(dir)), "modules", "caddyhttp", "metrics.go"))
}

var (
	// quoted is a PromQL string, where a metric name is only text.
	quoted = regexp.MustCompile("\"(?:[^\"\\\\]|\\\\.)*\"|'(?:[^'\\\\]|\\\\.)*'|`[^`]*`")
	// metricName is a name in PromQL of a metric of caddy-posts or of Caddy's HTTP server.
	metricName = regexp.MustCompile(`\bcaddy_(?:posts|http)_[a-zA-Z0-9_:]*`)
)

// usedNames lists the metric names of caddy-posts and Caddy's HTTP server that the dashboards'
// queries use, each with where it is used first.
func usedNames(t *testing.T) map[string]string {
	t.Helper()
	used := map[string]string{}
	for _, q := range queries(t) {
		for _, name := range metricName.FindAllString(quoted.ReplaceAllString(q.expr, ""), -1) {
			if used[name] == "" {
				used[name] = q.group
			}
		}
	}
	return used
}

// Every caddy_posts_* name a dashboard uses is a series of a family that package metrics
// defines, and every caddy_http_* name one of Caddy's: a renamed metric fails here, not on an
// operator's empty panel.
func TestTheDashboardsUseOnlyMetricsThatExist(t *testing.T) {
	exist := map[string]bool{}
	for _, families := range []map[string]string{ourFamilies(t), caddyFamilies(t)} {
		for name, kind := range families {
			for _, series := range seriesNames(name, kind) {
				exist[series] = true
			}
		}
	}
	for name, where := range usedNames(t) {
		if !exist[name] {
			t.Errorf("%s uses %s, which neither metrics/metrics.go nor Caddy's modules/caddyhttp/metrics.go defines (a histogram has only _bucket, _sum and _count)", where, name)
		}
	}
}

// Every metric family of package metrics is on some panel, so a new metric comes with its panel.
func TestEveryMetricOfPackageMetricsIsOnAPanel(t *testing.T) {
	used := usedNames(t)
	for name, kind := range ourFamilies(t) {
		found := false
		for _, series := range seriesNames(name, kind) {
			found = found || used[series] != ""
		}
		if !found {
			t.Errorf("no dashboard shows %s, which metrics/metrics.go defines", name)
		}
	}
}
