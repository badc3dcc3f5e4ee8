package docgen

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
)

// Document is a Markdown document of the repository, parsed as GitHub shows it (CommonMark and
// its extensions) by goldmark, which Caddy's templates already bring. Every test that reads the
// documentation's blocks or links reads them from here, so that they agree on what a block is.
type Document struct {
	File   string // a slash path relative to the root it was read from
	Source []byte
	Node   ast.Node
	Refs   []parser.Reference // its link reference definitions, [label]: destination, by label
	Blocks []Block
}

// Block is one fenced code block of a document.
type Block struct {
	Lang, Role string // the first two words of the info string
	Name       string // the third, which names a recipe (```caddyfile ecosystem <name>)
	Text       string // the lines between the fences, each ending in a newline
	File       string // the document
	Where      string // file:line of the opening fence
}

var markdown = goldmark.New(goldmark.WithExtensions(extension.GFM))

// Parse reads the document file under root. A fence never closed is an error.
func Parse(root, file string) (*Document, error) {
	source, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(file)))
	if err != nil {
		return nil, err
	}
	ctx := parser.NewContext()
	doc := &Document{File: file, Source: source, Node: markdown.Parser().Parse(text.NewReader(source), parser.WithContext(ctx))}
	doc.Refs = ctx.References()
	slices.SortFunc(doc.Refs, func(a, b parser.Reference) int { return bytes.Compare(a.Label(), b.Label()) })
	err = ast.Walk(doc.Node, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		code, ok := n.(*ast.FencedCodeBlock)
		if !ok || !entering {
			return ast.WalkContinue, nil
		}
		b := Block{File: file, Where: file + ":?"}
		if code.Info != nil {
			words := strings.Fields(string(code.Info.Segment.Value(source)))
			for i, w := range []*string{&b.Lang, &b.Role, &b.Name} {
				if i < len(words) {
					*w = words[i]
				}
			}
			b.Where = fmt.Sprintf("%s:%d", file, LineOf(source, code.Info.Segment.Start))
		} else if code.Lines().Len() > 0 {
			b.Where = fmt.Sprintf("%s:%d", file, LineOf(source, code.Lines().At(0).Start)-1)
		}
		lines := code.Lines()
		for i := range lines.Len() {
			seg := lines.At(i)
			b.Text += string(seg.Value(source))
		}
		// An unclosed fence runs to the end of the document, its closing fence being none.
		if lines.Len() > 0 && lines.At(lines.Len()-1).Stop == len(source) {
			return ast.WalkStop, fmt.Errorf("%s: the block is never closed", b.Where)
		}
		doc.Blocks = append(doc.Blocks, b)
		return ast.WalkSkipChildren, nil
	})
	return doc, err
}

// LineOf is the line, from 1, of the byte at offset in source.
func LineOf(source []byte, offset int) int {
	return 1 + bytes.Count(source[:offset], []byte("\n"))
}

// Read parses every document of the repository at root (Documents), in their order.
func Read(root string) ([]*Document, error) {
	files, err := Documents(root)
	if err != nil {
		return nil, err
	}
	docs := make([]*Document, len(files))
	for i, file := range files {
		if docs[i], err = Parse(root, file); err != nil {
			return nil, err
		}
	}
	return docs, nil
}

// Blocks is the fenced blocks of every document of the repository at root, document by document.
func Blocks(root string) ([]Block, error) {
	docs, err := Read(root)
	if err != nil {
		return nil, err
	}
	var blocks []Block
	for _, doc := range docs {
		blocks = append(blocks, doc.Blocks...)
	}
	return blocks, nil
}
