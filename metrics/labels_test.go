package metrics_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The values of a label that another package gives, read from its source: the help of the
// metric, which docs/operations.md shows, must name each, so that a value added there is
// documented here.
func TestEveryLabelValueTheCodeGivesIsInTheHelp(t *testing.T) {
	tests := []struct {
		metric  string
		files   []string       // globs, from the repository's root
		pattern *regexp.Regexp // its first group is a value
	}{
		{"caddy_posts_auth_total", []string{"auth/errors.go"}, regexp.MustCompile(`Reason\w+\s*=\s*"(\w+)"`)},
		{"caddy_posts_store_operation_duration_seconds", []string{"store/observed*.go"}, regexp.MustCompile(`\.begin\(ctx, "(\w+)"`)},
		{"caddy_posts_limit_refusals_total", []string{"*/*.go"}, regexp.MustCompile(`metrics\.LimitRefused\("(\w+)"\)`)},
	}
	helps := map[string]string{}
	for _, f := range registeredFamilies(t) {
		helps[f.name] = f.help
	}
	for _, tt := range tests {
		t.Run(tt.metric, func(t *testing.T) {
			help, ok := helps[tt.metric]
			if !ok {
				t.Fatalf("no metric %s is registered", tt.metric)
			}
			var files []string
			for _, glob := range tt.files {
				found, err := filepath.Glob(filepath.Join("..", glob))
				if err != nil || len(found) == 0 {
					t.Fatalf("no file %s (%v)", glob, err)
				}
				files = append(files, found...)
			}
			values := 0
			for _, file := range files {
				if strings.HasSuffix(file, "_test.go") {
					continue
				}
				src, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				for _, m := range tt.pattern.FindAllStringSubmatch(string(src), -1) {
					values++
					if !regexp.MustCompile(`\b` + m[1] + `\b`).MatchString(help) {
						t.Errorf("%s gives the value %q, which the help of %s does not name", filepath.Base(file), m[1], tt.metric)
					}
				}
			}
			if values < 5 {
				t.Fatalf("found %d values in %s; the pattern no longer reads it", values, tt.files)
			}
		})
	}
}
