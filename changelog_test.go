//go:build !race

// CHANGELOG.md: its form (Keep a Changelog), its Breaking entries, the version it gives the
// build recipes, and the release script that cuts a release of it.

package caddyposts

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestABreakIsAnnouncedOnlyByABreakingEntryNamingItInBackticks(t *testing.T) {
	changes := []breakingChange{{"Post.title", ""}, {"GET /posts/{id}", ""}}
	tests := []struct {
		name    string
		entries []string
		missing []string
	}{
		{"both named", []string{"- **Breaking:** `Post.title` is gone, and so is\n  `GET /posts/{id}`."}, nil},
		{"in two entries", []string{"- **Breaking:** `Post.title` is gone.", "- **Breaking:** `GET /posts/{id}` is gone."}, nil},
		{"one named without backticks", []string{"- **Breaking:** Post.title and `GET /posts/{id}` are gone."}, []string{"Post.title"}},
		{"named in an entry that does not say it breaks", []string{"- `Post.title` is gone.", "- **Breaking:** `GET /posts/{id}` is gone."}, []string{"Post.title"}},
		{"named by a part only", []string{"- **Breaking:** `Post` and `/posts/{id}` changed."}, []string{"Post.title", "GET /posts/{id}"}},
		{"no entries", nil, []string{"Post.title", "GET /posts/{id}"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := changeNames(unannounced(changes, tt.entries)); !slices.Equal(got, tt.missing) {
				t.Errorf("unannounced: %v, want %v", got, tt.missing)
			}
		})
	}
}

// A changelog as parseChangelog reads it.
type changelog struct {
	unreleased []string // the entries of the Unreleased section, each with its continuation lines
	releases   []string // the versions released, newest first
}

var (
	releaseHeading  = regexp.MustCompile(`^## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})$`)
	linkReference   = regexp.MustCompile(`^\[[^\]]+\]: \S+$`)
	changelogGroups = []string{"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}
)

// parseChangelog reads a changelog in Keep a Changelog's form, and says where it departs from it:
// "# Changelog" and an intro; "## [Unreleased]"; the releases, "## [x.y.z] - YYYY-MM-DD", newest
// first; under each, only Keep a Changelog's "### " groups, each once; at the bottom, a link
// reference for Unreleased and for each release, as make release writes them.
func parseChangelog(text string) (changelog, []string) {
	var log changelog
	var problems []string
	problem := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if lines[0] != "# Changelog" {
		problem("%s starts with %q, not \"# Changelog\"", changelogFile, lines[0])
	}
	// The link references are the lines at the bottom after the last section's text.
	end := len(lines)
	for end > 0 && (linkReference.MatchString(lines[end-1]) || lines[end-1] == "") {
		end--
	}
	links := slices.DeleteFunc(slices.Clone(lines[end:]), func(s string) bool { return s == "" })

	section := ""       // the "## " heading of the lines being read
	var groups []string // the "### " headings of that section
	var dates []time.Time
	var versions [][3]int
	intro := false
	for i, line := range lines[1:end] {
		at := fmt.Sprintf("%s:%d", changelogFile, i+2)
		switch {
		case strings.HasPrefix(line, "## "):
			groups = nil
			if section == "" {
				if line != "## [Unreleased]" {
					problem("%s: the first section is %q, not \"## [Unreleased]\"", at, line)
				}
				if !intro {
					problem("%s: no intro paragraph before %q", at, line)
				}
				section = line
				continue
			}
			section = line
			m := releaseHeading.FindStringSubmatch(line)
			if m == nil {
				problem("%s: %q is not a release heading \"## [x.y.z] - YYYY-MM-DD\"", at, line)
				continue
			}
			var v [3]int
			for j := range v {
				v[j], _ = strconv.Atoi(m[j+1])
			}
			date, err := time.Parse(time.DateOnly, m[4])
			if err != nil {
				problem("%s: %q has no real date: %v", at, line, err)
			}
			if n := len(versions); n > 0 && slices.Compare(v[:], versions[n-1][:]) >= 0 {
				problem("%s: %s follows %s: releases go newest first, with versions increasing going up", at, m[1]+"."+m[2]+"."+m[3], log.releases[n-1])
			}
			if n := len(dates); n > 0 && err == nil && date.After(dates[n-1]) {
				problem("%s: %s is dated after the release above it", at, line)
			}
			versions = append(versions, v)
			dates = append(dates, date)
			log.releases = append(log.releases, m[1]+"."+m[2]+"."+m[3])
		case strings.HasPrefix(line, "### ") && section != "":
			group := strings.TrimPrefix(line, "### ")
			if !slices.Contains(changelogGroups, group) {
				problem("%s: %q is not one of Keep a Changelog's groups (%s)", at, line, strings.Join(changelogGroups, ", "))
			}
			if slices.Contains(groups, group) {
				problem("%s: %q twice in %q", at, line, section)
			}
			groups = append(groups, group)
		case strings.HasPrefix(line, "#"):
			problem("%s: the heading %q is neither a release's nor one of its groups", at, line)
		case section == "":
			if strings.TrimSpace(line) != "" {
				intro = true
			}
		case section == "## [Unreleased]":
			if strings.HasPrefix(line, "- ") {
				log.unreleased = append(log.unreleased, line)
			} else if n := len(log.unreleased); n > 0 && strings.HasPrefix(line, " ") {
				log.unreleased[n-1] += "\n" + line
			}
		}
	}
	if section == "" {
		problem("%s has no \"## [Unreleased]\" section", changelogFile)
	}

	var want []string
	if len(log.releases) == 0 {
		want = []string{"[Unreleased]: " + changelogRepoURL + "/commits/HEAD"}
	} else {
		want = []string{fmt.Sprintf("[Unreleased]: %s/compare/v%s...HEAD", changelogRepoURL, log.releases[0])}
		for i, v := range log.releases {
			if i+1 < len(log.releases) {
				want = append(want, fmt.Sprintf("[%s]: %s/compare/v%s...v%s", v, changelogRepoURL, log.releases[i+1], v))
			} else {
				want = append(want, fmt.Sprintf("[%s]: %s/releases/tag/v%s", v, changelogRepoURL, v))
			}
		}
	}
	if !slices.Equal(links, want) {
		problem("%s ends with the link references\n\t%s\nwant\n\t%s", changelogFile, strings.Join(links, "\n\t"), strings.Join(want, "\n\t"))
	}
	return log, problems
}

func TestTheChangelogIsInKeepAChangelogsForm(t *testing.T) {
	log, problems := parseChangelog(contractsRead(t, changelogFile))
	for _, p := range problems {
		t.Error(p)
	}
	if len(log.releases) == 0 {
		t.Errorf("%s names no release", changelogFile)
	}
}

func TestTheChangelogCheckRefusesEachDepartureFromTheForm(t *testing.T) {
	const good = `# Changelog

The intro.

## [Unreleased]

### Added

- A thing.

## [0.2.0] - 2026-12-01

### Removed

- **Breaking:** ` + "`Post.title`" + `.

## [0.1.0] - 2026-11-27

The first release.

### Added

- Everything.

[Unreleased]: https://github.com/postsedge/caddy-posts/compare/v0.2.0...HEAD
[0.2.0]: https://github.com/postsedge/caddy-posts/compare/v0.1.0...v0.2.0
[0.1.0]: https://github.com/postsedge/caddy-posts/releases/tag/v0.1.0
`
	if log, problems := parseChangelog(good); len(problems) > 0 || !slices.Equal(log.releases, []string{"0.2.0", "0.1.0"}) || len(log.unreleased) != 1 {
		t.Fatalf("the good changelog: %v, %v", log, problems)
	}
	tests := []struct {
		name, old, new string
		says           string
	}{
		{"another title", "# Changelog", "# Changes", "not \"# Changelog\""},
		{"no intro", "The intro.\n", "", "no intro"},
		{"no Unreleased section", "## [Unreleased]\n\n### Added\n\n- A thing.\n\n", "", "the first section"},
		{"a release without a date", "## [0.2.0] - 2026-12-01", "## [0.2.0]", "is not a release heading"},
		{"a version that is not x.y.z", "## [0.2.0] - 2026-12-01", "## [0.2] - 2026-12-01", "is not a release heading"},
		{"a date that is not one", "2026-12-01", "2026-13-01", "no real date"},
		{"releases oldest first", "## [0.2.0] - 2026-12-01", "## [0.0.9] - 2026-12-01", "newest first"},
		{"the same version twice", "## [0.2.0] - 2026-12-01", "## [0.1.0] - 2026-12-01", "newest first"},
		{"a newer release dated earlier", "2026-12-01", "2026-11-01", "dated after"},
		{"a group of another name", "### Removed", "### Breaking", "not one of Keep a Changelog's groups"},
		{"a group twice", "- A thing.\n", "- A thing.\n\n### Added\n\n- Another.\n", "twice"},
		{"a deeper heading", "- Everything.\n", "- Everything.\n\n#### Details\n", "neither a release's"},
		{"a link reference missing", "[0.1.0]: https://github.com/postsedge/caddy-posts/releases/tag/v0.1.0\n", "", "link references"},
		{"Unreleased compared with an older release", "compare/v0.2.0...HEAD", "compare/v0.1.0...HEAD", "link references"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(good, tt.old) {
				t.Fatalf("the changelog holds no %q", tt.old)
			}
			_, problems := parseChangelog(strings.Replace(good, tt.old, tt.new, 1))
			if !strings.Contains(strings.Join(problems, "\n"), tt.says) {
				t.Errorf("problems %q, want one saying %q", problems, tt.says)
			}
		})
	}
}

// The build recipes' version of the module is what ./caddy build-info and list-modules --versions
// report; make test checks the binary, this the recipes.
func TestTheBuildRecipesPinTheModuleAtTheChangelogsLatestRelease(t *testing.T) {
	log, _ := parseChangelog(contractsRead(t, changelogFile))
	if len(log.releases) == 0 {
		t.Fatalf("%s names no release", changelogFile)
	}
	want := "v" + log.releases[0]
	if got := recipeVersions(t, contractsRead(t, recipe)); !slices.Equal(got, []string{want, want}) {
		t.Errorf("%s pins github.com/postsedge/caddy-posts at %v (plugin, replacement), want %s, %s's latest release",
			recipe, got, want, changelogFile)
	}
}

// recipeVersions are the module's version in a recipe's plugins and in its replacement's "old".
func recipeVersions(t *testing.T, recipe string) []string {
	t.Helper()
	var r struct {
		Plugins []struct {
			ModulePath string `json:"module_path"`
			Version    string `json:"version"`
		} `json:"plugins"`
		Replacements []struct {
			Old string `json:"old"`
		} `json:"replacements"`
	}
	if err := json.Unmarshal([]byte(recipe), &r); err != nil {
		t.Fatal(err)
	}
	const module = "github.com/postsedge/caddy-posts"
	var versions []string
	for _, p := range r.Plugins {
		if p.ModulePath == module {
			versions = append(versions, p.Version)
		}
	}
	for _, rp := range r.Replacements {
		if v, ok := strings.CutPrefix(rp.Old, module+"@"); ok {
			versions = append(versions, v)
		}
	}
	return versions
}

// make release runs release/release.sh; here it runs on a copy of the files it changes.
func TestTheReleaseScriptCutsAReleaseTheChecksAccept(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatalf("make release runs release/release.sh with sh, which is not on PATH: %v", err)
	}
	setUp := func(t *testing.T, unreleased string) string {
		dir := t.TempDir()
		for _, file := range []string{openAPIFile, schemaFile, releasedOpenAPI, releasedSchema, recipe} {
			contractsWrite(t, filepath.Join(dir, file), contractsRead(t, file))
		}
		log := contractsRead(t, changelogFile)
		// The copy's Unreleased section holds only the entry given.
		start := strings.Index(log, "## [Unreleased]\n")
		next := start + strings.Index(log[start+1:], "\n## [") + 2
		contractsWrite(t, filepath.Join(dir, changelogFile), log[:start]+"## [Unreleased]\n"+unreleased+"\n"+log[next:])
		// The contracts of the copy change since the release, as a release would have them.
		schema := strings.Replace(contractsRead(t, schemaFile), "type Post {", "type Post {\n  \"A tag.\"\n  tag: String", 1)
		contractsWrite(t, filepath.Join(dir, schemaFile), schema)
		return dir
	}
	script, err := filepath.Abs("release/release.sh")
	if err != nil {
		t.Fatal(err)
	}
	run := func(dir, version string) (string, error) {
		cmd := exec.Command(sh, script, version)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	log, _ := parseChangelog(contractsRead(t, changelogFile))
	latest := strings.Split(log.releases[0], ".")
	minor, _ := strconv.Atoi(latest[1])
	next := fmt.Sprintf("%s.%d.0", latest[0], minor+1)

	dir := setUp(t, "\n### Added\n\n- `Post.tag`.\n")
	if out, err := run(dir, next); err != nil {
		t.Fatalf("release.sh %s: %v\n%s", next, err, out)
	}
	cut, problems := parseChangelog(contractsRead(t, filepath.Join(dir, changelogFile)))
	for _, p := range problems {
		t.Error(p)
	}
	if len(cut.unreleased) != 0 || cut.releases[0] != next || !slices.Equal(cut.releases[1:], log.releases) {
		t.Errorf("after the release: Unreleased %q, releases %v", cut.unreleased, cut.releases)
	}
	if !strings.Contains(contractsRead(t, filepath.Join(dir, changelogFile)), "## ["+next+"] - "+time.Now().Format(time.DateOnly)+"\n\n### Added\n\n- `Post.tag`.\n") {
		t.Errorf("the release's section is not today's with the Unreleased entries")
	}
	for _, file := range []string{openAPIFile, schemaFile} {
		if contractsRead(t, filepath.Join(dir, file)) != contractsRead(t, filepath.Join(dir, releasedCopy(file))) {
			t.Errorf("%s is not a copy of %s", releasedCopy(file), file)
		}
	}
	if got := recipeVersions(t, contractsRead(t, filepath.Join(dir, recipe))); !slices.Equal(got, []string{"v" + next, "v" + next}) {
		t.Errorf("%s pins %v, want v%s", recipe, got, next)
	}

	refusals := []struct {
		name, unreleased, version string
	}{
		{"an empty Unreleased section", "", next},
		{"a version not above the latest", "\n- `Post.tag`.\n", log.releases[0]},
		{"a version that is not x.y.z", "\n- `Post.tag`.\n", "v" + next},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			dir := setUp(t, tt.unreleased)
			before := contractsRead(t, filepath.Join(dir, changelogFile))
			if out, err := run(dir, tt.version); err == nil {
				t.Errorf("release.sh %s succeeded:\n%s", tt.version, out)
			}
			if contractsRead(t, filepath.Join(dir, changelogFile)) != before {
				t.Errorf("release.sh changed %s", changelogFile)
			}
		})
	}
}

func contractsRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func contractsWrite(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
