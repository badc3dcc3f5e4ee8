package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// qualifying names a package's tests built only without the race detector or with the tag long,
// and those that read race.Enabled themselves or through the functions they call; not the
// others, nor a test of a file built for neither pass.
func TestQualifyingNamesWhatOnlyTheStepWithoutTheRaceDetectorChecks(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"plain_test.go": `package p

import (
	"testing"

	checked "github.com/postsedge/caddy-posts/internal/race"
)

func TestPlain(t *testing.T) {}

func TestReads(t *testing.T) {
	if !checked.Enabled {
		t.Log("a bound on time")
	}
}

func TestThroughHelpers(t *testing.T) { outer(t) }

func outer(t *testing.T) { bound(t) }

func bound(t *testing.T) { _ = checked.Enabled }

func FuzzReads(f *testing.F) { bound(nil) }

func TestMain(m *testing.M) { _ = checked.Enabled }
`,
		"other_test.go": `package p

import "testing"

// race is not the package internal/race here.
var race struct{ Enabled bool }

func TestReadsAnotherEnabled(t *testing.T) { _ = race.Enabled }
`,
		"norace_test.go":    "//go:build !race\n\npackage p\n\nimport \"testing\"\n\nfunc TestWithoutRace(t *testing.T) {}\n",
		"long_test.go":      "//go:build long\n\npackage p\n\nimport \"testing\"\n\nfunc TestLong(t *testing.T) {}\n\nfunc helper() {}\n",
		"race_test.go":      "//go:build race\n\npackage p\n\nimport \"testing\"\n\nfunc TestOnlyWithRace(t *testing.T) {}\n",
		"other_tag_test.go": "//go:build integration\n\npackage p\n\nimport \"testing\"\n\nfunc TestIntegration(t *testing.T) {}\n",
		"code.go":           "package p\n\nfunc TestLookalike() {}\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := qualifying(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(got)
	want := []string{"FuzzReads", "TestLong", "TestReads", "TestThroughHelpers", "TestWithoutRace"}
	if !slices.Equal(got, want) {
		t.Errorf("qualifying = %v; want %v", got, want)
	}
}
