package metrics_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/postsedge/caddy-posts/internal/docgen"
	"github.com/postsedge/caddy-posts/metrics"
)

// family is a metric family as its collector describes itself to a registry.
type family struct {
	name, kind, help string
	labels           []string
}

// collected keeps the collectors registered with it, in their order.
type collected []prometheus.Collector

func (c *collected) Register(col prometheus.Collector) error { *c = append(*c, col); return nil }
func (c *collected) MustRegister(cs ...prometheus.Collector) { *c = append(*c, cs...) }
func (c *collected) Unregister(prometheus.Collector) bool    { return false }

// registeredFamilies are the families metrics.Register registers, in its order, read from the
// collectors themselves rather than from the source, so that what is documented is what a
// registry gets.
func registeredFamilies(t *testing.T) []family {
	t.Helper()
	var reg collected
	if err := metrics.Register(&reg); err != nil {
		t.Fatal(err)
	}
	var families []family
	for _, c := range reg {
		f := describe(t, c)
		f.kind = kind(t, c)
		families = append(families, f)
	}
	return families
}

// describe reads the name, help and labels of the one family that c describes. client_golang
// gives a Desc no getters, only its String, which this reads.
func describe(t *testing.T, c prometheus.Collector) family {
	t.Helper()
	descs := make(chan *prometheus.Desc, 2)
	c.Describe(descs)
	close(descs)
	if len(descs) != 1 {
		t.Fatalf("a collector of metrics.Register describes %d families; this test reads collectors of one", len(descs))
	}
	s := (<-descs).String()
	cannot := func() { t.Fatalf("cannot read %s: a const label, or client_golang's Desc.String changed", s) }
	var f family
	rest, ok := strings.CutPrefix(s, "Desc{fqName: ")
	quoted := func(into *string) {
		q, err := strconv.QuotedPrefix(rest)
		if !ok || err != nil {
			cannot()
		}
		*into, _ = strconv.Unquote(q)
		rest = rest[len(q):]
	}
	quoted(&f.name)
	rest, ok = strings.CutPrefix(rest, ", help: ")
	quoted(&f.help)
	_, rest, ok = strings.Cut(rest, "constLabels: {}, variableLabels: {")
	if !ok || !strings.HasSuffix(rest, "}}") {
		cannot()
	}
	if labels := strings.TrimSuffix(rest, "}}"); labels != "" {
		f.labels = strings.Split(labels, ",")
	}
	return f
}

// kind is the type of the family that c collects: a vector's by its Go type, a single metric's
// by what it writes.
func kind(t *testing.T, c prometheus.Collector) string {
	t.Helper()
	switch c.(type) {
	case *prometheus.CounterVec:
		return "counter"
	case *prometheus.GaugeVec:
		return "gauge"
	case *prometheus.HistogramVec:
		return "histogram"
	case *prometheus.SummaryVec:
		return "summary"
	}
	metrics := make(chan prometheus.Metric, 2)
	c.Collect(metrics)
	close(metrics)
	var m dto.Metric
	if len(metrics) != 1 {
		t.Fatalf("a collector of metrics.Register collects %d metrics; this test reads single metrics and vectors", len(metrics))
	}
	if err := (<-metrics).Write(&m); err != nil {
		t.Fatal(err)
	}
	switch {
	case m.Counter != nil:
		return "counter"
	case m.Gauge != nil:
		return "gauge"
	case m.Histogram != nil:
		return "histogram"
	case m.Summary != nil:
		return "summary"
	}
	t.Fatalf("a collector of metrics.Register writes a metric of no type this test knows: %v", &m)
	return ""
}

// table is the Markdown table of families: one row each, in the order given.
func table(families []family) string {
	var b strings.Builder
	b.WriteString("| series | type | labels | what it counts |\n|---|---|---|---|\n")
	for _, f := range families {
		labels := make([]string, len(f.labels))
		for i, l := range f.labels {
			labels[i] = "`" + l + "`"
		}
		// A | in a help would end its cell.
		b.WriteString("| `" + f.name + "` | " + f.kind + " | " + strings.Join(labels, ", ") + " | " + strings.ReplaceAll(f.help, "|", `\|`) + " |\n")
	}
	return b.String()
}

// The table of metrics of docs/operations.md is made from the collectors metrics.Register
// registers, in its order: each family's name, type and labels as a registry gets them, and its
// help, which /metrics shows too. A metric added, renamed or relabelled changes the page.
func TestTheOperationsPageListsEveryMetric(t *testing.T) {
	docgen.Region(t, "../docs/operations.md", "metrics", "./metrics/", table(registeredFamilies(t)))
}
