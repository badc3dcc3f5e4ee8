//go:build !race

// Checks of the documents against the code: nothing concurrent, and a test binary that links
// the whole module and Caddy, which the race detector makes slow to link; make test runs them in
// its step without it.

package caddyposts

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// Every path ARCHITECTURE.md names exists, so the map cannot point at a file that moved.
func TestArchitectureNamesOnlyPathsThatExist(t *testing.T) {
	doc, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	paths := regexp.MustCompile("`([a-z_/]+(/|\\.go|\\.graphql))`").FindAllStringSubmatch(string(doc), -1)
	if len(paths) < 20 {
		t.Fatalf("found %d paths in ARCHITECTURE.md; the pattern no longer reads it", len(paths))
	}
	for _, m := range paths {
		path := strings.TrimSuffix(m[1], "/")
		if _, err := os.Stat(path); err != nil {
			t.Errorf("ARCHITECTURE.md names %s, which does not exist", m[1])
		}
	}
}

// Every folder of Go code is on the map, itself or the folder it belongs to.
func TestArchitectureNamesEveryPackage(t *testing.T) {
	doc, err := os.ReadFile("ARCHITECTURE.md")
	if err != nil {
		t.Fatal(err)
	}
	checked := map[string]bool{}
	err = filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && (d.Name() == "testdata" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != ".":
			return filepath.SkipDir
		case d.IsDir() || !strings.HasSuffix(path, ".go") || filepath.Dir(path) == ".":
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if checked[dir] {
			return nil
		}
		checked[dir] = true
		if !strings.Contains(string(doc), "`"+dir+"/") && !strings.Contains(string(doc), "`"+strings.Split(dir, "/")[0]+"/`") {
			t.Errorf("ARCHITECTURE.md does not name %s/ nor the folder it belongs to", dir)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
