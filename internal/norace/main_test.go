package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// qualifying names a package's tests built only without the race detector or with the tag long,
// and those that depend on what differs between the two steps: race.Enabled, read directly or
// through the functions they call, a list that a file of one step adds to in its init, a
// constant or a method each step declares for itself. Not the others, nor a test of a file built
// for neither step, nor one whose local variables share a name with what one step alone
// declares or its init declares.
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
		// A list a file built without the race detector adds to in its init, and a factor each
		// step declares for itself.
		"backends_test.go": `package p

import "testing"

var backends []string

var Factor = factor

func TestEachBackend(t *testing.T) {
	for range backends {
	}
}

func TestBound(t *testing.T) { _ = Factor }

type recorder struct{}

func TestMethod(t *testing.T) { _ = recorder{}.limit() }

func TestLocalNames(t *testing.T) {
	err, helperWithoutRace := error(nil), 0
	_, _ = err, helperWithoutRace
}
`,
		"mongo_test.go": `//go:build !race

package p

func init() {
	backends = append(backends, "mongo")
	err := error(nil)
	_ = func() { helperWithoutRace = 1 }
	_ = err
}

var helperWithoutRace int
`,
		"factor_race_test.go":   "//go:build race\n\npackage p\n\nconst factor = 3\n\nfunc (recorder) limit() int { return 3 }\n",
		"factor_norace_test.go": "//go:build !race\n\npackage p\n\nconst factor = 1\n\nfunc (recorder) limit() int { return 1 }\n",
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
	want := []string{"FuzzReads", "TestBound", "TestEachBackend", "TestLong", "TestMethod", "TestReads", "TestThroughHelpers", "TestWithoutRace"}
	if !slices.Equal(got, want) {
		t.Errorf("qualifying = %v; want %v", got, want)
	}
}
