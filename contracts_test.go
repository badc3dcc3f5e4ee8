//go:build !race

// The contracts a release promises, held against the last release: the OpenAPI description and
// the GraphQL schema may break their copies in release/ only where CHANGELOG.md's Unreleased
// section says so; CHANGELOG.md keeps Keep a Changelog's form; and the build recipes pin the
// module at the changelog's latest release, the version ./caddy reports. Nothing concurrent:
// the race detector would only slow the link of a binary with the whole module in it.

package caddyposts

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The files of the contracts, and the last release's copies of them.
const (
	openAPIFile        = "openapi/openapi.yaml"
	schemaFile         = "schema/schema.graphql"
	releasedOpenAPI    = "release/openapi.yaml"
	releasedSchema     = "release/schema.graphql"
	changelogFile      = "CHANGELOG.md"
	recipe             = "xcaddy.json" // the build recipe of ./caddy, which pins the module's version
	changelogRepoURL   = "https://github.com/postsedge/caddy-posts"
	breakingEntryStart = "- **Breaking:**"
)

// A breakingChange is named as a person writes it in the changelog (`Post.title`,
// `Query.posts(limit:)`, `GET /posts/{id}`, `NewPost.body`); detail says what changed.
type breakingChange struct {
	name, detail string
}

func (c breakingChange) String() string { return "`" + c.name + "`: " + c.detail }

func TestEveryBreakingChangeOfTheContractsSinceTheLastReleaseIsInTheChangelog(t *testing.T) {
	if err := checkContracts(".", contractsRead(t, changelogFile)); err != nil {
		t.Error(err)
	}
}

func TestTheContractCheckFailsOnABreakTheChangelogDoesNotName(t *testing.T) {
	changelog := contractsRead(t, changelogFile)
	tests := []struct {
		name   string
		file   string
		cut    *regexp.Regexp // its first match in the copy of file becomes with
		with   string
		breaks string // the name of the break the changelog must give
	}{
		{"a GraphQL field removed", schemaFile, regexp.MustCompile(`(?m)^  """\n[^"]*"""\n  title: String!\n`), "", "Post.title"},
		{"a REST path removed", openAPIFile, regexp.MustCompile(`(?ms)^  /posts/\{id\}:\n.*?^components:\n`), "components:\n", "/posts/{id}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, file := range []string{openAPIFile, schemaFile, releasedOpenAPI, releasedSchema} {
				text := contractsRead(t, file)
				if file == tt.file {
					m := tt.cut.FindStringIndex(text)
					if m == nil {
						t.Fatalf("%s holds nothing that matches %s", file, tt.cut)
					}
					text = text[:m[0]] + tt.with + text[m[1]:]
				}
				contractsWrite(t, filepath.Join(dir, file), text)
			}
			err := checkContracts(dir, changelog)
			if err == nil || !strings.Contains(err.Error(), "`"+tt.breaks+"`") {
				t.Fatalf("the check gave %v, want a failure naming `%s`", err, tt.breaks)
			}
			announced := strings.Replace(changelog, "## [Unreleased]\n",
				"## [Unreleased]\n\n### Removed\n\n- **Breaking:** `"+tt.breaks+"` is gone.\n", 1)
			if err := checkContracts(dir, announced); err != nil {
				t.Errorf("with the break in the changelog, the check gave %v", err)
			}
		})
	}
}

// checkContracts holds the contracts of the repository at root against its release/ copies and
// the changelog's Unreleased section.
func checkContracts(root, changelog string) error {
	read := func(file string) ([]byte, error) { return os.ReadFile(filepath.Join(root, file)) }
	files := map[string][]byte{}
	for _, file := range []string{openAPIFile, schemaFile, releasedOpenAPI, releasedSchema} {
		data, err := read(file)
		if err != nil {
			return err
		}
		files[file] = data
	}
	graphQL, err := graphQLBreakingChanges(string(files[releasedSchema]), string(files[schemaFile]))
	if err != nil {
		return err
	}
	rest, err := openAPIBreakingChanges(files[releasedOpenAPI], files[openAPIFile])
	if err != nil {
		return err
	}
	log, problems := parseChangelog(changelog)
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n"))
	}
	var missing []string
	for _, set := range []struct {
		file    string
		changes []breakingChange
	}{{schemaFile, graphQL}, {openAPIFile, rest}} {
		for _, c := range unannounced(set.changes, log.unreleased) {
			missing = append(missing, fmt.Sprintf("%s breaks %s: %s", set.file, releasedCopy(set.file), c))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the Unreleased section of %s has no entry starting %q that names in backticks:\n%s",
			changelogFile, breakingEntryStart, strings.Join(missing, "\n"))
	}
	return nil
}

func releasedCopy(file string) string {
	if file == schemaFile {
		return releasedSchema
	}
	return releasedOpenAPI
}

// unannounced are the changes no breaking entry names: an entry starting "- **Breaking:**" with
// the change's name, exactly, between backticks.
func unannounced(changes []breakingChange, entries []string) []breakingChange {
	named := map[string]bool{}
	code := regexp.MustCompile("`([^`]+)`")
	for _, entry := range entries {
		if strings.HasPrefix(entry, breakingEntryStart) {
			for _, m := range code.FindAllStringSubmatch(entry, -1) {
				named[m[1]] = true
			}
		}
	}
	var out []breakingChange
	for _, c := range changes {
		if !named[c.name] {
			out = append(out, c)
		}
	}
	return out
}

// A breakCase edits a contract once and names the breaks the edit makes; none for a safe change.
type breakCase struct {
	name     string
	old, new string // old replaced by new, once
	want     []string
}

// checkBreakCases runs each case on base through find, which compares two versions of a contract.
func checkBreakCases(t *testing.T, base string, cases []breakCase, find func(old, new string) ([]breakingChange, error)) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(base, tt.old) {
				t.Fatalf("the contract holds no %q", tt.old)
			}
			changes, err := find(base, strings.Replace(base, tt.old, tt.new, 1))
			if err != nil {
				t.Fatal(err)
			}
			if got := changeNames(changes); !slices.Equal(got, tt.want) {
				t.Errorf("got %v (%v), want %v", got, changes, tt.want)
			}
		})
	}
}

func changeNames(changes []breakingChange) []string {
	var names []string
	for _, c := range changes {
		names = append(names, c.name)
	}
	return names
}
