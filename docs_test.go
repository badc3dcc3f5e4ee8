//go:build !race

// Checks of the documents against the code: nothing concurrent, and a test binary that links
// the whole module and Caddy, which the race detector makes slow to link; make test runs them in
// its step without it.

package caddyposts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"gopkg.in/yaml.v3"

	"github.com/postsedge/caddy-posts/internal/docgen"

	// Every directive an example of the documentation may use (log, basic_auth, ...), as in a
	// real ./caddy.
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

// The documentation's fenced blocks say in their info string what they are, after the language,
// which GitHub ignores when it highlights them:
//
//	```caddyfile           a whole Caddyfile: as caddy fmt writes it, and it adapts
//	```caddyfile syntax    the directive's grammar: as caddy fmt writes it
//	```caddyfile ecosystem <name>
//	                       a whole Caddyfile with modules this test binary lacks (rate_limit,
//	                       cache): as caddy fmt writes it; ecosystem/ runs it in ./caddy
//	```json adapted        what caddy adapt makes of the nearest caddyfile block above in the same
//	                       document: the whole config, or one handler of it when the JSON is an
//	                       object with "handler"
//	```json                JSON, or JSON lines: it parses
//	```yaml                YAML: it parses
//	```sh tour             README.md's tour, run in order against make run's site by
//	                       interop/tour.test.mjs
//	```sh tour-stream      the tour's subscription, which the tour test leaves running meanwhile
//	```sh run              curl calls to make run's site (localhost:8080, the key dev-key) in any
//	                       document, each block run as pasted by interop/shell.test.mjs
const (
	roleSyntax     = "syntax"
	roleEcosystem  = "ecosystem"
	roleAdapted    = "adapted"
	roleTour       = "tour"
	roleTourStream = "tour-stream"
	roleRun        = "run"
)

// blockRoles are the second words a block of each language may have.
var blockRoles = map[string][]string{
	"caddyfile": {"", roleSyntax, roleEcosystem},
	"json":      {"", roleAdapted},
	"sh":        {"", roleTour, roleTourStream, roleRun},
}

// callsMakeRun matches a curl call to make run's site (the command's lines joined at a
// backslash), which a reader runs as pasted: a plain ```sh block with one would be run by no test.
var callsMakeRun = regexp.MustCompile(`(?m)^\s*curl\s([^\n]|\\\n)*localhost:8080`)

// caddyfileLike matches a line that opens a site or a posts block, as no other language here does.
var caddyfileLike = regexp.MustCompile(`(?m)^\s*(posts|https?://\S+|[a-z0-9-]+(\.[a-z0-9-]+)+|:\d+)( [^{]*)?\{$`)

func TestTheDocumentsBlocksSayWhatTheyAre(t *testing.T) {
	for _, b := range allBlocks(t) {
		if allowed, ok := blockRoles[b.Lang]; ok && !slices.Contains(allowed, b.Role) {
			t.Errorf("%s: ```%s %s: the second word must be one of %q", b.Where, b.Lang, b.Role, allowed)
		}
		if b.Lang != "caddyfile" && caddyfileLike.MatchString(b.Text) {
			t.Errorf("%s: a ```%s block looks like a Caddyfile; fence it as ```caddyfile so that it is checked", b.Where, b.Lang)
		}
		if b.Lang == "sh" && b.Role == "" && callsMakeRun.MatchString(b.Text) {
			t.Errorf("%s: a ```sh block calls make run's site; fence it as ```sh %s so that interop/shell.test.mjs runs it", b.Where, roleRun)
		}
		// interop/tour.test.mjs runs README.md's tour as make run serves it.
		if (b.Role == roleTour || b.Role == roleTourStream) && b.File != "README.md" {
			t.Errorf("%s: ```%s %s belongs to README.md's tour only", b.Where, b.Lang, b.Role)
		}
	}
}

func TestTheDocumentsCaddyfilesAreFormattedAndAdapt(t *testing.T) {
	repo, err := os.ReadFile("Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	blocks := []docgen.Block{{Lang: "caddyfile", Text: string(repo), File: "Caddyfile", Where: "Caddyfile"}}
	blocks = append(blocks, allBlocks(t)...)
	checked := 0
	for _, b := range blocks {
		if b.Lang != "caddyfile" {
			continue
		}
		checked++
		t.Run(b.Where+" is as caddy fmt writes it", func(t *testing.T) {
			if formatted := caddyfile.Format([]byte(b.Text)); !bytes.Equal(formatted, []byte(b.Text)) {
				t.Errorf("caddy fmt changes it:\n%s\nto:\n%s", b.Text, formatted)
			}
		})
		if b.Role == roleSyntax || b.Role == roleEcosystem {
			continue // a grammar; or a recipe that ecosystem/ adapts and runs
		}
		t.Run(b.Where+" adapts without an error or a warning", func(t *testing.T) {
			adapt(t, b.Where, b.Text)
		})
	}
	if checked < 10 {
		t.Fatalf("found %d Caddyfiles; the documentation has more, so the reading is broken", checked)
	}
}

func TestTheDocumentsJSONExamplesAreWhatCaddyAdaptMakes(t *testing.T) {
	compared := 0
	for _, doc := range readDocuments(t) {
		var caddyfileAbove *docgen.Block
		for _, b := range doc.Blocks {
			switch {
			case b.Lang == "caddyfile" && b.Role == "":
				caddyfileAbove = &b
			case b.Lang == "json" && b.Role == roleAdapted:
				compared++
				t.Run(b.Where+" is caddy adapt of the Caddyfile above it", func(t *testing.T) {
					if caddyfileAbove == nil {
						t.Fatalf("there is no Caddyfile above it in %s", doc.File)
					}
					var example, adapted any
					if err := json.Unmarshal([]byte(b.Text), &example); err != nil {
						t.Fatalf("the example is not JSON: %v", err)
					}
					if err := json.Unmarshal(adapt(t, caddyfileAbove.Where, caddyfileAbove.Text), &adapted); err != nil {
						t.Fatal(err)
					}
					if name, ok := example.(map[string]any)["handler"]; ok {
						handlers := handlersNamed(adapted, name)
						if len(handlers) != 1 {
							t.Fatalf("the config of %s has %d handlers %q, want 1", caddyfileAbove.Where, len(handlers), name)
						}
						adapted = handlers[0]
					}
					if !reflect.DeepEqual(example, adapted) {
						want, _ := json.MarshalIndent(adapted, "", "  ")
						t.Errorf("the example differs from what caddy adapt makes of %s:\n%s", caddyfileAbove.Where, want)
					}
				})
			}
		}
	}
	if compared < 2 {
		t.Fatalf("found %d ```json %s blocks, want at least 2", compared, roleAdapted)
	}
}

// A reader copies a JSON or YAML example into a file or a request: it must at least parse.
func TestTheDocumentsJSONAndYAMLBlocksParse(t *testing.T) {
	counts := map[string]int{}
	for _, b := range allBlocks(t) {
		var err error
		switch {
		case b.Lang == "json" && b.Role != roleAdapted: // those are parsed and compared above
			err = parseJSONOrLines(b.Text)
		case b.Lang == "yaml" || b.Lang == "yml":
			err = parseYAML(b.Text)
		default:
			continue
		}
		counts[b.Lang]++
		if err != nil {
			t.Errorf("%s: the ```%s block does not parse: %v\n%s", b.Where, b.Lang, err, b.Text)
		}
	}
	if counts["json"] < 2 || counts["yaml"]+counts["yml"] < 1 {
		t.Fatalf("found %v blocks; the documentation has more, so the reading is broken", counts)
	}
}

func TestParsingOfJSONAndYAMLBlocksFailsOnWhatAReaderCouldNotUse(t *testing.T) {
	for _, c := range []struct {
		name, text string
		parse      func(string) error
		ok         bool
	}{
		{"a JSON object", `{"a": [1, 2]}` + "\n", parseJSONOrLines, true},
		{"JSON lines", "{\"a\": 1}\n\n{\"b\": 2}\n", parseJSONOrLines, true},
		{"a value split across lines", "{\"a\": 1,\n \"b\": 2}\n", parseJSONOrLines, true},
		{"JSON with an elision", `{"a": 1, ...}` + "\n", parseJSONOrLines, false},
		{"a JSON line that is not JSON", "{\"a\": 1}\n{b: 2}\n", parseJSONOrLines, false},
		{"two values on one line", `{"a": 1} {"b": 2}` + "\n", parseJSONOrLines, false},
		{"nothing", "\n", parseJSONOrLines, false},
		{"YAML", "a:\n  b: [1, 2]\n", parseYAML, true},
		{"two YAML documents", "a: 1\n---\nb: 2\n", parseYAML, true},
		{"YAML with a tab for indentation", "a:\n\tb: 1\n", parseYAML, false},
		{"YAML with an unclosed flow", "a: {b: 1\n", parseYAML, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := c.parse(c.text); (err == nil) != c.ok {
				t.Errorf("parsed: %v, want ok %v", err, c.ok)
			}
		})
	}
}

// parseJSONOrLines accepts one JSON value, or JSON lines (one value on each non-empty line).
func parseJSONOrLines(text string) error {
	if json.Valid([]byte(text)) {
		return nil
	}
	values := 0
	for i, line := range strings.Split(text, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		values++
		if !json.Valid([]byte(line)) {
			var v any
			return fmt.Errorf("neither one JSON value nor JSON lines: line %d: %w", i+1, json.Unmarshal([]byte(line), &v))
		}
	}
	if values == 0 {
		return errors.New("no JSON in it")
	}
	return nil
}

// parseYAML accepts a stream of YAML documents.
func parseYAML(text string) error {
	dec := yaml.NewDecoder(strings.NewReader(text))
	for {
		var v any
		switch err := dec.Decode(&v); {
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
	}
}

// adapt runs the caddyfile adapter as caddy adapt does and fails on an error or a warning.
func adapt(t *testing.T, where, text string) []byte {
	t.Helper()
	cfg, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(text), map[string]any{"filename": where})
	if err != nil {
		t.Fatalf("caddy adapt fails:\n%s\n%v", text, err)
	}
	for _, w := range warnings {
		t.Errorf("caddy adapt warns: %s", w.String())
	}
	return cfg
}

// handlersNamed finds, anywhere in a config, the objects whose "handler" is name.
func handlersNamed(v, name any) []any {
	var found []any
	switch v := v.(type) {
	case map[string]any:
		if v["handler"] == name {
			found = append(found, v)
		}
		for _, member := range v {
			found = append(found, handlersNamed(member, name)...)
		}
	case []any:
		for _, item := range v {
			found = append(found, handlersNamed(item, name)...)
		}
	}
	return found
}

// readDocuments parses every Markdown document of the repository (docgen.Read).
func readDocuments(t *testing.T) []*docgen.Document {
	t.Helper()
	docs, err := docgen.Read(".")
	if err != nil {
		t.Fatal(err)
	}
	files := make([]string, len(docs))
	for i, doc := range docs {
		files[i] = doc.File
	}
	if !slices.Contains(files, "README.md") || !slices.Contains(files, "docs/subscriptions.md") || len(files) < 10 {
		t.Fatalf("the documents found are %q; the listing is broken", files)
	}
	return docs
}

// allBlocks is the fenced blocks of every document, document by document.
func allBlocks(t *testing.T) []docgen.Block {
	t.Helper()
	var blocks []docgen.Block
	for _, doc := range readDocuments(t) {
		blocks = append(blocks, doc.Blocks...)
	}
	return blocks
}
