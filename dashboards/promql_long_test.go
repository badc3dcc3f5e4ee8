//go:build long

// promtool's check of the dashboards' queries: a process, which the gate (go test ./...) runs
// none of; make test, which installs promtool (make deps), runs it in its step of long tests.

package dashboards

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every query is PromQL that Prometheus accepts, once Grafana has put in its variables: each is
// a recording rule of a file that promtool checks.
func TestEveryQueryIsValidPromQL(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool is not installed: apt-get install prometheus (Debian's package; .ci/run installs it)")
	}
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	type group struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	}
	var groups []group
	all := dashboards(t)
	for _, q := range queries(t) {
		expr, err := expand(q.expr, all[q.file])
		if err != nil {
			t.Errorf("%s: %v", q.group, err)
			continue
		}
		if len(groups) == 0 || groups[len(groups)-1].Name != q.group {
			groups = append(groups, group{Name: q.group})
		}
		g := &groups[len(groups)-1]
		g.Rules = append(g.Rules, rule{q.record, expr})
	}
	// JSON is YAML, which promtool reads.
	rules, err := json.MarshalIndent(map[string][]group{"groups": groups}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "dashboards.rules.json")
	if err := os.WriteFile(file, rules, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(promtool, "check", "rules", file).CombinedOutput()
	if err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	rulesChecked := 0
	for _, g := range groups {
		rulesChecked += len(g.Rules)
	}
	if want := fmt.Sprintf("SUCCESS: %d rules found", rulesChecked); !strings.Contains(string(out), want) {
		t.Errorf("promtool check rules did not say %q:\n%s", want, out)
	}
}
