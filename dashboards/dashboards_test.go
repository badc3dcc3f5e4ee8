package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
)

// dashboard is what the tests read of a Grafana dashboard's JSON.
type dashboard struct {
	Templating struct {
		List []variable `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

// variable is a template variable of a dashboard.
type variable struct {
	Name       string    `json:"name"`
	Type       string    `json:"type"`
	Query      any       `json:"query"` // a string, or Grafana 10's object with the string in "query"
	Datasource reference `json:"datasource"`
}

// panel is a panel of a dashboard, a row among them.
type panel struct {
	ID         int       `json:"id"`
	Title      string    `json:"title"`
	Datasource reference `json:"datasource"`
	Targets    []struct {
		RefID      string    `json:"refId"`
		Expr       string    `json:"expr"`
		Datasource reference `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// reference names a data source.
type reference struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

// query is a PromQL expression of a dashboard, and where it is.
type query struct {
	file, group, record, expr string
}

// dashboards reads every dashboard of the folder, by file name.
func dashboards(t *testing.T) map[string]dashboard {
	t.Helper()
	files, err := filepath.Glob("*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboard found (%v)", err)
	}
	all := map[string]dashboard{}
	for _, file := range files {
		text, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var d dashboard
		if err := json.Unmarshal(text, &d); err != nil {
			t.Fatalf("%s is not a dashboard: %v", file, err)
		}
		all[file] = d
	}
	return all
}

// panels lists d's panels, a collapsed row's among them.
func (d dashboard) panels() []panel {
	var all []panel
	for _, p := range d.Panels {
		all = append(all, p)
		all = append(all, p.Panels...)
	}
	return all
}

// labelValues is the query of a variable that lists the values of a label.
var labelValues = regexp.MustCompile(`^label_values\((.+),\s*(\w+)\)$`)

// queries lists the expressions of every panel and query variable of every dashboard; a
// variable's label_values(selector, label) is the PromQL count by (label) (selector).
func queries(t *testing.T) []query {
	t.Helper()
	var all []query
	for file, d := range dashboards(t) {
		for _, p := range d.panels() {
			for _, target := range p.Targets {
				all = append(all, query{file, fmt.Sprintf("%s panel %d: %s", file, p.ID, p.Title),
					fmt.Sprintf("panel_%d:%s", p.ID, target.RefID), target.Expr})
			}
		}
		for _, v := range d.Templating.List {
			if v.Type != "query" {
				continue
			}
			text, _ := v.Query.(string)
			if object, ok := v.Query.(map[string]any); ok {
				text, _ = object["query"].(string)
			}
			m := labelValues.FindStringSubmatch(text)
			if m == nil {
				t.Errorf("%s variable %s: %q is not label_values(selector, label), the one query this test reads", file, v.Name, text)
				continue
			}
			all = append(all, query{file, fmt.Sprintf("%s variable %s", file, v.Name),
				"variable:" + v.Name, fmt.Sprintf("count by (%s) (%s)", m[2], m[1])})
		}
	}
	if len(all) == 0 {
		t.Fatal("the dashboards have no query")
	}
	return all
}

// grafanaVariable is a variable in a query: $name, ${name} or ${name:format}.
var grafanaVariable = regexp.MustCompile(`\$(?:\{(\w+)(?::\w+)?\}|(\w+))`)

// globalVariables are plausible values of the variables Grafana itself defines.
var globalVariables = map[string]string{"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}

// expand is expr with each variable replaced: Grafana's own by a duration, the dashboard's by
// the regular expression its "All" stands for.
func expand(expr string, d dashboard) (string, error) {
	var unknown []string
	expanded := grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		m := grafanaVariable.FindStringSubmatch(v)
		name := m[1] + m[2]
		if value, ok := globalVariables[name]; ok {
			return value
		}
		if slices.ContainsFunc(d.Templating.List, func(v variable) bool { return v.Name == name }) {
			return ".*"
		}
		unknown = append(unknown, v)
		return v
	})
	if unknown != nil {
		return "", fmt.Errorf("%q uses %v, which the dashboard does not define", expr, unknown)
	}
	return expanded, nil
}

// Every panel and every query asks the data source that the dashboard's datasource variable
// picks, so the dashboard imports into any Grafana, whatever its Prometheus is called.
func TestEveryPanelAsksTheChosenPrometheus(t *testing.T) {
	chosen := reference{Type: "prometheus", UID: "${datasource}"}
	for file, d := range dashboards(t) {
		if !slices.ContainsFunc(d.Templating.List, func(v variable) bool {
			return v.Name == "datasource" && v.Type == "datasource" && v.Query == "prometheus"
		}) {
			t.Errorf("%s has no variable datasource of type datasource and query prometheus", file)
		}
		for _, v := range d.Templating.List {
			if v.Type == "query" && v.Datasource != chosen {
				t.Errorf("%s variable %s asks %+v, want %+v", file, v.Name, v.Datasource, chosen)
			}
		}
		for _, p := range d.panels() {
			if len(p.Targets) > 0 && p.Datasource != chosen {
				t.Errorf("%s panel %d (%s) asks %+v, want %+v", file, p.ID, p.Title, p.Datasource, chosen)
			}
			for _, target := range p.Targets {
				if target.Datasource != chosen {
					t.Errorf("%s panel %d (%s) query %s asks %+v, want %+v", file, p.ID, p.Title, target.RefID, target.Datasource, chosen)
				}
			}
		}
	}
}
