//go:build !race

package caddyposts

import (
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/yuin/goldmark/ast"

	"github.com/postsedge/caddy-posts/internal/docgen"
)

// Every link of the documentation between its files leads somewhere: a page moved or a heading
// renamed shows here rather than as a reader's dead end on GitHub.
func TestTheDocumentsLinksLeadToFilesAndHeadingsThatExist(t *testing.T) {
	files, err := docgen.Documents(".")
	if err != nil {
		t.Fatal(err)
	}
	problems, links, err := linkProblems(".", files)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Error(p)
	}
	if links < 40 {
		t.Fatalf("found %d links to the repository's files; the documentation has more, so the reading is broken", links)
	}
}

func TestLinkCheckingFailsOnALinkToAMissingFileOrAnchor(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		want      []string // the problems, each as a part of its message; none for a good document
	}{
		{"links to files and headings that exist", `# Title

## Try it: the *tour*
## Try it: the *tour*
## ` + "`posts`" + ` and the C++ API, v2.0
<a id="kept"></a>

[a](other.md) [b](other.md#a-heading-of-other) [c](#try-it-the-tour) [d](#try-it-the-tour-1)
[e](#posts-and-the-c-api-v20) [f](#kept) [g](sub/) [h](https://example.com/missing.md#x)
[i](mailto:a@example.com) [j](other.md#named) [k] ![l](sub/pic.png) [m](<other.md>)
[n](other%20file.md) ` + "`[p](missing.md)`" + `

[k]: ./sub/../other.md#a-heading-of-other

` + "```md\n[q](missing.md)\n```\n", nil},
		{"a link to a missing file", "[a](missing.md)\n", []string{`doc.md:1: [a](missing.md): there is no missing.md`}},
		{"a link to a missing heading of this document", "# Title\n\n[a](#titel)\n", []string{`doc.md:3: [a](#titel): doc.md has no heading nor <a id> "titel"`}},
		{"a link to a missing heading of another", "[a](other.md#a-heading)\n", []string{`other.md has no heading nor <a id> "a-heading"`}},
		{"a third heading of a name that is there twice", "## x\n## x\n[a](#x-2)\n", []string{`has no heading nor <a id> "x-2"`}},
		{"headings numbered as GitHub numbers them", "## x\n## x\n## x-1\n## x\n[a](#x-1-1) [b](#x-2)\n", nil},
		{"a reference to a missing file", "See [the page].\n\n[the page]: gone.md\n", []string{`doc.md:3: [the page]: gone.md: there is no gone.md`}},
		{"an unused reference to a missing file", "Text.\n\n[unused]: gone.md\n", []string{`[unused]: gone.md: there is no gone.md`}},
		{"a line of a code file", "[a](sub/code.go#L10)\n", []string{`sub/code.go#L10: a line number drifts as the code changes`}},
		{"an anchor into a file that is not Markdown", "[a](sub/code.go#main)\n", []string{`sub/code.go is not Markdown: its anchors cannot be checked`}},
		{"a path from the root", "[a](/other.md)\n", []string{`an absolute path`}},
		{"a path out of the repository", "[a](../outside.md)\n", []string{`leads out of the repository`}},
		{"an image that is missing", "![a](sub/missing.png)\n", []string{`there is no sub/missing.png`}},
		{"a link in a table", "| a | b |\n|---|---|\n| x | [y](nowhere.md) |\n", []string{`doc.md:3: [y](nowhere.md): there is no nowhere.md`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			write := func(name, text string) {
				file := filepath.Join(root, filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			write("other.md", "# Other\n\n## A heading of other\n\n<a name=\"named\"></a>\n")
			write("other file.md", "# Spaced\n")
			write("sub/pic.png", "")
			write("sub/code.go", "package sub\n")
			write("doc.md", c.doc)
			problems, _, err := linkProblems(root, []string{"doc.md"})
			if err != nil {
				t.Fatal(err)
			}
			if len(problems) != len(c.want) {
				t.Fatalf("problems:\n%s\nwant %d: %q", strings.Join(problems, "\n"), len(c.want), c.want)
			}
			for i, want := range c.want {
				if !strings.Contains(problems[i], want) {
					t.Errorf("problem %q, want it to hold %q", problems[i], want)
				}
			}
		})
	}
}

func TestHeadingsAreSluggedAsGitHubDoes(t *testing.T) {
	for _, c := range []struct{ heading, slug string }{
		{"Try it", "try-it"},
		{"Production: a MongoDB replica set", "production-a-mongodb-replica-set"},
		{"Subscriptions over HTTP (SSE and multipart)", "subscriptions-over-http-sse-and-multipart"},
		{"What a reload does to subscribers", "what-a-reload-does-to-subscribers"},
		{"Keep `api_key` out of logs", "keep-api_key-out-of-logs"},
		{"0.1.0 - 2026-11-27", "010---2026-11-27"},
		{"Écrire à l'API", "écrire-à-lapi"},
	} {
		if got := slug(c.heading); got != c.slug {
			t.Errorf("slug(%q) = %q, want %q", c.heading, got, c.slug)
		}
	}
}

// linkProblems checks the links of each of files (Markdown documents, slash paths relative to
// root) to the repository's files: inline links and images, and reference definitions
// ([label]: destination, used or not). Links to a URL with a scheme (https:, mailto:) are not
// followed. Each problem is a message that starts with the link's file:line. links is how many
// links to the repository's files it checked.
func linkProblems(root string, files []string) (problems []string, links int, err error) {
	parsed := map[string]*docgen.Document{}
	read := func(file string) (*docgen.Document, error) {
		if doc, ok := parsed[file]; ok {
			return doc, nil
		}
		doc, err := docgen.Parse(root, file)
		parsed[file] = doc
		return doc, err
	}
	for _, file := range files {
		doc, err := read(file)
		if err != nil {
			return nil, 0, err
		}
		check := func(where, shown, destination string) error {
			if scheme.MatchString(destination) {
				return nil
			}
			links++
			problem, err := linkProblem(root, file, destination, read)
			if problem != "" {
				problems = append(problems, fmt.Sprintf("%s: %s: %s", where, shown, problem))
			}
			return err
		}
		err = ast.Walk(doc.Node, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
			if !entering {
				return ast.WalkContinue, nil
			}
			var destination string
			switch n := n.(type) {
			case *ast.Link:
				if n.Reference != nil {
					return ast.WalkContinue, nil // its definition is checked below
				}
				destination = string(n.Destination)
			case *ast.Image:
				destination = string(n.Destination)
			default:
				return ast.WalkContinue, nil
			}
			shown := fmt.Sprintf("[%s](%s)", plainText(n, doc.Source), destination)
			return ast.WalkContinue, check(fmt.Sprintf("%s:%d", file, lineOfNode(n, doc.Source)), shown, destination)
		})
		if err != nil {
			return nil, 0, err
		}
		for _, ref := range doc.Refs {
			shown := fmt.Sprintf("[%s]: %s", ref.Label(), ref.Destination())
			where := file
			if i := strings.Index(string(doc.Source), fmt.Sprintf("[%s]:", ref.Label())); i >= 0 {
				where = fmt.Sprintf("%s:%d", file, docgen.LineOf(doc.Source, i))
			}
			if err := check(where, shown, string(ref.Destination())); err != nil {
				return nil, 0, err
			}
		}
	}
	return problems, links, nil
}

// scheme matches a destination that is a URL with a scheme, which the test does not follow.
var scheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// lineAnchor matches GitHub's anchors of a code file's lines: #L10, #L10-L20.
var lineAnchor = regexp.MustCompile(`^L\d+(-L\d+)?$`)

// linkProblem says what is wrong with destination, a link of the document file (both relative to
// root), or "" when nothing is. read parses a Markdown file of root, for its anchors.
func linkProblem(root, file, destination string, read func(string) (*docgen.Document, error)) (string, error) {
	target, anchor, hasAnchor := strings.Cut(destination, "#")
	target, _, _ = strings.Cut(target, "?")
	target, err := url.PathUnescape(target)
	if err != nil {
		return fmt.Sprintf("the path does not decode: %v", err), nil
	}
	if anchor, err = url.PathUnescape(anchor); err != nil {
		return fmt.Sprintf("the anchor does not decode: %v", err), nil
	}
	if strings.HasPrefix(target, "/") {
		return "an absolute path leads elsewhere off GitHub; make it relative to the document", nil
	}
	if target == "" {
		target = file
	} else {
		target = path.Join(path.Dir(file), target)
		if target == ".." || strings.HasPrefix(target, "../") {
			return "the path leads out of the repository", nil
		}
		info, err := os.Stat(filepath.Join(root, filepath.FromSlash(target)))
		if err != nil {
			return fmt.Sprintf("there is no %s", target), nil
		}
		if info.IsDir() && hasAnchor {
			return fmt.Sprintf("%s is a folder: it has no anchors", target), nil
		}
	}
	switch {
	case !hasAnchor:
		return "", nil
	case lineAnchor.MatchString(anchor):
		return fmt.Sprintf("%s#%s: a line number drifts as the code changes; name the function or the file instead", target, anchor), nil
	case !strings.HasSuffix(target, ".md"):
		return fmt.Sprintf("%s is not Markdown: its anchors cannot be checked", target), nil
	}
	doc, err := read(target)
	if err != nil {
		return "", err
	}
	if !slices.Contains(anchors(doc), anchor) {
		return fmt.Sprintf("%s has no heading nor <a id> %q", target, anchor), nil
	}
	return "", nil
}

// explicitAnchor matches an HTML anchor's id or name: <a id="x">, <a name="x">.
var explicitAnchor = regexp.MustCompile(`<a\s[^>]*\b(?:id|name)\s*=\s*"([^"]+)"`)

// anchors is what a link into doc may name after #: its headings' slugs, a heading whose slug
// is there already taking -1, -2, ... as GitHub numbers them; and its <a id> and <a name>.
func anchors(doc *docgen.Document) []string {
	var found []string
	occurrences := map[string]int{} // as github-slugger counts them
	_ = ast.Walk(doc.Node, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if _, ok := n.(*ast.Heading); !ok || !entering {
			return ast.WalkContinue, nil
		}
		first := slug(plainText(n, doc.Source))
		s := first
		for _, taken := occurrences[s]; taken; _, taken = occurrences[s] {
			occurrences[first]++
			s = fmt.Sprintf("%s-%d", first, occurrences[first])
		}
		occurrences[s] = 0
		found = append(found, s)
		return ast.WalkSkipChildren, nil
	})
	for _, m := range explicitAnchor.FindAllSubmatch(doc.Source, -1) {
		found = append(found, string(m[1]))
	}
	return found
}

// slug is the anchor GitHub gives a heading of text (github-slugger): lowercase, every
// character dropped but letters, digits, marks, '-', '_' and spaces, each space made a '-'.
func slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// plainText is the text of n as GitHub shows it, without its markup: the text of its
// emphasis, code spans and links.
func plainText(n ast.Node, source []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.Text:
			b.Write(n.Segment.Value(source))
			if n.SoftLineBreak() || n.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(n.Value)
		case *ast.AutoLink:
			b.Write(n.Label(source))
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// lineOfNode is the line of an inline node: that of its first text, or else of its paragraph.
func lineOfNode(n ast.Node, source []byte) int {
	offset := -1
	_ = ast.Walk(n, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if t, ok := n.(*ast.Text); ok && entering {
			offset = t.Segment.Start
			return ast.WalkStop, nil
		}
		return ast.WalkContinue, nil
	})
	for p := n; offset < 0 && p != nil; p = p.Parent() {
		if p.Type() == ast.TypeBlock && p.Lines().Len() > 0 {
			offset = p.Lines().At(0).Start
		}
	}
	return docgen.LineOf(source, max(offset, 0))
}
