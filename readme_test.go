//go:build !race

// Checks of the documents against the code: nothing concurrent, and a test binary that links
// the whole module and Caddy, which the race detector makes slow to link; make test runs them in
// its step without it.

package caddyposts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	// Every directive a README example may use (log, basic_auth, ...), as in a real ./caddy.
	_ "github.com/caddyserver/caddy/v2/modules/standard"
)

// The README's fenced blocks say in their info string what they are, after the language, which
// GitHub ignores when it highlights them:
//
//	```caddyfile           a whole Caddyfile: as caddy fmt writes it, and it adapts
//	```caddyfile syntax    the directive's grammar: as caddy fmt writes it
//	```caddyfile ecosystem <name>
//	                       a whole Caddyfile with modules this test binary lacks (rate_limit,
//	                       cache): as caddy fmt writes it; ecosystem/ runs it in ./caddy-ecosystem
//	```json adapted        what caddy adapt makes of the nearest caddyfile block above: the whole
//	                       config, or one handler of it when the JSON is an object with "handler"
const (
	roleSyntax    = "syntax"
	roleEcosystem = "ecosystem"
	roleAdapted   = "adapted"
)

// fencedBlock is one fenced code block of a Markdown file.
type fencedBlock struct {
	lang, role string // the first two words of the info string
	text       string // the lines between the fences, each ending in a newline
	where      string // file:line of the opening fence
}

// fencedBlocks reads the fenced code blocks of a Markdown file.
func fencedBlocks(t *testing.T, file string) []fencedBlock {
	t.Helper()
	doc, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []fencedBlock
	var open *fencedBlock
	for i, line := range strings.Split(string(doc), "\n") {
		switch {
		case open == nil && strings.HasPrefix(line, "```"):
			words := strings.Fields(strings.TrimPrefix(line, "```"))
			open = &fencedBlock{where: fmt.Sprintf("%s:%d", file, i+1)}
			if len(words) > 0 {
				open.lang = words[0]
			}
			if len(words) > 1 {
				open.role = words[1]
			}
		case open != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, *open)
			open = nil
		case open != nil:
			open.text += line + "\n"
		}
	}
	if open != nil {
		t.Fatalf("%s: the block is never closed", open.where)
	}
	return blocks
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

// caddyfileLike matches a line that opens a site or a posts block, as no other language here does.
var caddyfileLike = regexp.MustCompile(`(?m)^\s*(posts|https?://\S+|[a-z0-9-]+(\.[a-z0-9-]+)+|:\d+)( [^{]*)?\{$`)

func TestREADMEBlocksSayWhatTheyAre(t *testing.T) {
	roles := map[string][]string{"caddyfile": {"", roleSyntax, roleEcosystem}, "json": {"", roleAdapted}}
	for _, b := range fencedBlocks(t, "README.md") {
		if allowed, ok := roles[b.lang]; ok && !slices.Contains(allowed, b.role) {
			t.Errorf("%s: ```%s %s: the second word must be one of %q", b.where, b.lang, b.role, allowed)
		}
		if b.lang != "caddyfile" && caddyfileLike.MatchString(b.text) {
			t.Errorf("%s: a ```%s block looks like a Caddyfile; fence it as ```caddyfile so that it is checked", b.where, b.lang)
		}
	}
}

func TestREADMECaddyfilesAreFormattedAndAdapt(t *testing.T) {
	repo, err := os.ReadFile("Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	blocks := []fencedBlock{{lang: "caddyfile", text: string(repo), where: "Caddyfile"}}
	blocks = append(blocks, fencedBlocks(t, "README.md")...)
	checked := 0
	for _, b := range blocks {
		if b.lang != "caddyfile" {
			continue
		}
		checked++
		t.Run(b.where+" is as caddy fmt writes it", func(t *testing.T) {
			if formatted := caddyfile.Format([]byte(b.text)); !bytes.Equal(formatted, []byte(b.text)) {
				t.Errorf("caddy fmt changes it:\n%s\nto:\n%s", b.text, formatted)
			}
		})
		if b.role == roleSyntax || b.role == roleEcosystem {
			continue // a grammar; or a recipe that ecosystem/ adapts and runs
		}
		t.Run(b.where+" adapts without an error or a warning", func(t *testing.T) {
			adapt(t, b.where, b.text)
		})
	}
	if checked < 5 {
		t.Fatalf("found %d Caddyfiles; the README has more, so the reading is broken", checked)
	}
}

func TestREADMEJSONExamplesAreWhatCaddyAdaptMakes(t *testing.T) {
	var caddyfileAbove *fencedBlock
	compared := 0
	for _, b := range fencedBlocks(t, "README.md") {
		switch {
		case b.lang == "caddyfile" && b.role == "":
			caddyfileAbove = &b
		case b.lang == "json" && b.role == roleAdapted:
			compared++
			t.Run(b.where+" is caddy adapt of the Caddyfile above it", func(t *testing.T) {
				if caddyfileAbove == nil {
					t.Fatal("there is no Caddyfile above it")
				}
				var example, adapted any
				if err := json.Unmarshal([]byte(b.text), &example); err != nil {
					t.Fatalf("the example is not JSON: %v", err)
				}
				if err := json.Unmarshal(adapt(t, caddyfileAbove.where, caddyfileAbove.text), &adapted); err != nil {
					t.Fatal(err)
				}
				if name, ok := example.(map[string]any)["handler"]; ok {
					handlers := handlersNamed(adapted, name)
					if len(handlers) != 1 {
						t.Fatalf("the config of %s has %d handlers %q, want 1", caddyfileAbove.where, len(handlers), name)
					}
					adapted = handlers[0]
				}
				if !reflect.DeepEqual(example, adapted) {
					want, _ := json.MarshalIndent(adapted, "", "  ")
					t.Errorf("the example differs from what caddy adapt makes of %s:\n%s", caddyfileAbove.where, want)
				}
			})
		}
	}
	if compared < 2 {
		t.Fatalf("found %d ```json %s blocks, want at least 2", compared, roleAdapted)
	}
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
