package docgen

import (
	"io/fs"
	"path/filepath"
	"strings"
)

// Documents lists the Markdown documents of the repository at root, as slash paths relative to
// it in lexical order: every *.md file but those under node_modules, testdata and hidden folders,
// and GraphiQL's own README (handlers/graphiql/ is vendored). The tests that read the
// documentation's code blocks and links all take their list from here, so that a page added or
// a snippet moved from one page to another is still read; interop/lib.mjs keeps the same rule
// for the JavaScript tests.
func Documents(root string) ([]string, error) {
	var docs []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		name := d.Name()
		switch {
		case d.IsDir() && rel != "." && (name == "node_modules" || name == "testdata" || strings.HasPrefix(name, ".") || rel == "handlers/graphiql"):
			return filepath.SkipDir
		case !d.IsDir() && strings.HasSuffix(name, ".md"):
			docs = append(docs, rel)
		}
		return nil
	})
	return docs, err
}
