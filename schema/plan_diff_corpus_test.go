// The documents of the differential test (plan_diff_test.go) that the repository holds: every
// string of its Go tests, of its interop suites and of its documentation's code blocks that
// parses as an executable GraphQL document, read from the files at test time, so that a new test's documents
// join by themselves.

package schema_test

import (
	"bytes"
	"encoding/json"
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/vektah/gqlparser/v2/ast"
	"github.com/vektah/gqlparser/v2/parser"

	"github.com/postsedge/caddy-posts/internal/docgen"
)

// corpusDoc is one request found in the repository: a document, the operation to run when the
// document has several, and the variables its source gave with it, if any.
type corpusDoc struct {
	source        string // "go", "interop" or "docs"
	file          string // relative to the repository's root
	query         string
	operationName string
	variables     map[string]any // as the source gave them; nil for none
}

// repositoryRoot is the directory of the go.mod of the module, above the package's directory.
func repositoryRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if data, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.Contains(data, []byte("module github.com/postsedge/caddy-posts\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fs.ErrNotExist
		}
		dir = parent
	}
}

// repositoryDocuments reads the documents of the repository under root: the strings of every
// *_test.go (all modules in it), of interop/*.mjs and *.js, and of the code blocks of every
// Markdown document (docgen.Documents) that parse as executable documents. A literal that is a JSON request body (or holds one, as a
// WebSocket message does) gives its query, operationName and variables. Each document, with
// its operation and variables, is listed once, under the first source it was found in.
func repositoryDocuments(root string) ([]corpusDoc, error) {
	var docs []corpusDoc
	seen := map[string]bool{}
	add := func(source, file string, literals []string) {
		for _, lit := range literals {
			for _, d := range requestsIn(lit) {
				d.source, d.file = source, file
				vars, _ := json.Marshal(d.variables)
				key := d.query + "\x00" + d.operationName + "\x00" + string(vars)
				if !seen[key] {
					seen[key] = true
					docs = append(docs, d)
				}
			}
		}
	}
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := e.Name()
		if e.IsDir() {
			if name == "node_modules" || (strings.HasPrefix(name, ".") && path != root) {
				return filepath.SkipDir
			}
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		switch {
		case strings.HasSuffix(name, "_test.go"):
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			add("go", rel, goStrings(src))
		case filepath.Dir(rel) == "interop" && (strings.HasSuffix(name, ".mjs") || strings.HasSuffix(name, ".js")):
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			add("interop", rel, jsStrings(string(src)))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	blocks, err := docgen.Blocks(root)
	if err != nil {
		return nil, err
	}
	for _, b := range blocks {
		switch b.Lang {
		case "graphql", "json":
			add("docs", b.File, []string{b.Text})
		case "js", "javascript", "mjs":
			add("docs", b.File, jsStrings(b.Text))
		case "sh", "bash", "shell", "console":
			add("docs", b.File, withVariables(shellWords(b.Text)))
		}
	}
	return docs, nil
}

// requestsIn is the requests a literal holds: the literal itself as a document; the value of a
// query= parameter (curl's --data-urlencode); or, for JSON, each object in it with a query
// member. A template's substitutions are filled first when they can be (fillTemplate).
func requestsIn(lit string) []corpusDoc {
	if !strings.Contains(lit, "{") {
		return nil
	}
	if strings.Contains(lit, "${") {
		filled, ok := fillTemplate(lit)
		if !ok {
			return nil
		}
		lit = filled
	}
	text := strings.TrimSpace(lit)
	if q, ok := strings.CutPrefix(text, "query="); ok {
		return documentsOf(q, "", nil)
	}
	if (strings.HasPrefix(text, "{") || strings.HasPrefix(text, "[")) && json.Valid([]byte(text)) {
		var v any
		json.Unmarshal([]byte(text), &v)
		var found []corpusDoc
		jsonRequests(v, func(query, operationName string, variables map[string]any) {
			found = append(found, documentsOf(query, operationName, variables)...)
		})
		return found
	}
	return documentsOf(lit, "", nil)
}

// jsonRequests calls found for each object in v, at any depth, with a string query member.
func jsonRequests(v any, found func(query, operationName string, variables map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		if q, ok := v["query"].(string); ok {
			name, _ := v["operationName"].(string)
			vars, _ := v["variables"].(map[string]any)
			found(q, name, vars)
		}
		for _, m := range v {
			jsonRequests(m, found)
		}
	case []any:
		for _, e := range v {
			jsonRequests(e, found)
		}
	}
}

// documentsOf is query as requests when it parses as an executable document: one request
// with the operation named when the source named one or the document has one operation, and
// one per named operation otherwise.
func documentsOf(query, operationName string, variables map[string]any) []corpusDoc {
	if !utf8.ValidString(query) {
		return nil
	}
	doc, err := parser.ParseQuery(&ast.Source{Input: query})
	if err != nil || len(doc.Operations) == 0 {
		return nil
	}
	if operationName != "" || len(doc.Operations) == 1 {
		return []corpusDoc{{query: query, operationName: operationName, variables: variables}}
	}
	var docs []corpusDoc
	for _, op := range doc.Operations {
		if op.Name != "" {
			docs = append(docs, corpusDoc{query: query, operationName: op.Name, variables: variables})
		}
	}
	return docs
}

// templateHole is a substitution of a JavaScript template in a GraphQL string value, with the
// argument or input member it is the value of and the text around it in the string:
// `title: "${title}"`, `userId: "carol${i}"`.
var templateHole = regexp.MustCompile(`(\w+)(\s*:\s*")([^"$\\]*)\$\{[^{}]*\}([^"$\\]*")`)

// fillTemplate fills the substitutions of a template that are in string values of an argument
// or an input member: a whole value with one that suits its name (a post's id for id, a user's
// for userId, a word otherwise), part of one with a digit. A template with a substitution
// anywhere else is not filled.
func fillTemplate(lit string) (string, bool) {
	filled := templateHole.ReplaceAllStringFunc(lit, func(hole string) string {
		m := templateHole.FindStringSubmatch(hole)
		value := "1"
		if m[3] == "" && m[4] == `"` {
			switch m[1] {
			case "id":
				value = templatePostID
			case "userId":
				value = "alice"
			default:
				value = "filled"
			}
		}
		return m[1] + m[2] + m[3] + value + m[4]
	})
	return filled, !strings.Contains(filled, "${")
}

// templatePostID is the id a template's id gets: one no post has, so the document answers
// null or NOT_FOUND alike on both sides.
const templatePostID = "000000000000000000000001"

// goStrings is the string literals of Go source, their escapes read.
func goStrings(src []byte) []string {
	fset := token.NewFileSet()
	var s scanner.Scanner
	s.Init(fset.AddFile("", fset.Base(), len(src)), src, nil, 0)
	var out []string
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			return out
		}
		if tok == token.STRING {
			if v, err := strconv.Unquote(lit); err == nil {
				out = append(out, v)
			}
		}
	}
}

// jsStrings is the string and template literals of JavaScript source, their escapes read; a
// template's substitutions stay as ${…}. Comments are skipped, and so are regular expression
// literals, told from a division by the token before them.
func jsStrings(src string) []string {
	var out []string
	prev := byte(0) // the last character of the last token, 0 at the start
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case strings.HasPrefix(src[i:], "//"):
			i += lineEnd(src[i:])
		case strings.HasPrefix(src[i:], "/*"):
			end := strings.Index(src[i+2:], "*/")
			if end < 0 {
				return out
			}
			i += end + 4
		case c == '\'' || c == '"':
			s, n, ok := jsQuoted(src[i:])
			if ok {
				out = append(out, s)
			}
			i, prev = i+n, c
		case c == '`':
			s, n := jsTemplate(src[i:])
			out = append(out, s)
			i, prev = i+n, c
		case c == '/' && (prev == 0 || strings.IndexByte("(,=:[!&|?{};+-*%<>~^", prev) >= 0):
			i += jsRegexp(src[i:])
			prev = '/'
		default:
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				prev = c
			}
			i++
		}
	}
	return out
}

func lineEnd(s string) int {
	if n := strings.IndexByte(s, '\n'); n >= 0 {
		return n
	}
	return len(s)
}

// jsQuoted reads the '…' or "…" literal at the start of s: its value, its length in s, and
// whether it ended on its line.
func jsQuoted(s string) (string, int, bool) {
	quote := s[0]
	var b strings.Builder
	for i := 1; i < len(s); {
		switch c := s[i]; c {
		case quote:
			return b.String(), i + 1, true
		case '\n':
			return "", i, false
		case '\\':
			i += jsEscape(s[i:], &b)
		default:
			b.WriteByte(c)
			i++
		}
	}
	return "", len(s), false
}

// jsTemplate reads the `…` literal at the start of s: its cooked text with each substitution
// kept as written, and its length in s.
func jsTemplate(s string) (string, int) {
	var b strings.Builder
	for i := 1; i < len(s); {
		switch c := s[i]; {
		case c == '`':
			return b.String(), i + 1
		case c == '\\':
			i += jsEscape(s[i:], &b)
		case strings.HasPrefix(s[i:], "${"):
			n := jsSubstitution(s[i:])
			b.WriteString(s[i : i+n])
			i += n
		default:
			b.WriteByte(c)
			i++
		}
	}
	return b.String(), len(s)
}

// jsSubstitution is the length of the ${…} at the start of s, its nested braces, strings and
// templates included.
func jsSubstitution(s string) int {
	depth := 0
	for i := 2; i < len(s); {
		switch c := s[i]; c {
		case '{':
			depth++
			i++
		case '}':
			if depth == 0 {
				return i + 1
			}
			depth--
			i++
		case '\'', '"':
			_, n, _ := jsQuoted(s[i:])
			i += n
		case '`':
			_, n := jsTemplate(s[i:])
			i += n
		default:
			i++
		}
	}
	return len(s)
}

// jsRegexp is the length of the regular expression literal at the start of s, its flags
// included.
func jsRegexp(s string) int {
	inClass := false
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '[':
			inClass = true
		case ']':
			inClass = false
		case '\n':
			return i
		case '/':
			if !inClass {
				i++
				for i < len(s) && (s[i] >= 'a' && s[i] <= 'z') {
					i++
				}
				return i
			}
		}
	}
	return len(s)
}

// jsEscape writes the character of the escape at the start of s and returns its length.
func jsEscape(s string, b *strings.Builder) int {
	if len(s) < 2 {
		return len(s)
	}
	simple := map[byte]string{'n': "\n", 't': "\t", 'r': "\r", 'b': "\b", 'f': "\f", 'v': "\v", '0': "\x00", '\n': ""}
	if v, ok := simple[s[1]]; ok {
		b.WriteString(v)
		return 2
	}
	hex := func(h string) (rune, bool) {
		v, err := strconv.ParseUint(h, 16, 32)
		return rune(v), err == nil
	}
	switch {
	case s[1] == 'x' && len(s) >= 4:
		if r, ok := hex(s[2:4]); ok {
			b.WriteRune(r)
			return 4
		}
	case strings.HasPrefix(s[1:], "u{"):
		if end := strings.IndexByte(s, '}'); end > 0 {
			if r, ok := hex(s[3:end]); ok {
				b.WriteRune(r)
				return end + 1
			}
		}
	case s[1] == 'u' && len(s) >= 6:
		if r, ok := hex(s[2:6]); ok {
			if utf16IsHigh(r) && len(s) >= 12 && s[6:8] == `\u` {
				if lo, ok := hex(s[8:12]); ok {
					b.WriteRune((r-0xD800)<<10 + (lo - 0xDC00) + 0x10000)
					return 12
				}
			}
			b.WriteRune(r)
			return 6
		}
	}
	r, n := utf8.DecodeRuneInString(s[1:])
	b.WriteRune(r)
	return 1 + n
}

func utf16IsHigh(r rune) bool { return r >= 0xD800 && r < 0xDC00 }

// shellWords is the quoted words of a shell script: '…' as written, "…" with \" \\ \$ and \`
// read. Comments are skipped.
func shellWords(src string) []string {
	var out []string
	for i := 0; i < len(src); {
		switch c := src[i]; {
		case c == '#' && (i == 0 || strings.IndexByte(" \t\n", src[i-1]) >= 0):
			i += lineEnd(src[i:])
		case c == '\\':
			i += 2
		case c == '\'':
			end := strings.IndexByte(src[i+1:], '\'')
			if end < 0 {
				return out
			}
			out = append(out, src[i+1:i+1+end])
			i += end + 2
		case c == '"':
			var b strings.Builder
			j := i + 1
			for ; j < len(src) && src[j] != '"'; j++ {
				if src[j] == '\\' && j+1 < len(src) && strings.IndexByte("\"\\$`", src[j+1]) >= 0 {
					j++
				}
				b.WriteByte(src[j])
			}
			out = append(out, b.String())
			i = j + 1
		default:
			i++
		}
	}
	return out
}

// withVariables joins each query= word to the variables= word right after it, as curl's
// --data-urlencode sends them together, into a JSON request.
func withVariables(words []string) []string {
	out := slices.Clone(words)
	for i := 1; i < len(words); i++ {
		query, isQuery := strings.CutPrefix(words[i-1], "query=")
		vars, isVars := strings.CutPrefix(words[i], "variables=")
		if isQuery && isVars && json.Valid([]byte(vars)) {
			q, _ := json.Marshal(query)
			out = append(out, `{"query": `+string(q)+`, "variables": `+vars+`}`)
		}
	}
	return out
}
