package caddymodule

import (
	"fmt"
	"go/ast"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/postsedge/caddy-posts/internal/docgen"
)

// docs/configuration.md's syntax block and its reference of every subdirective are made here from
// the code, so that they cannot go stale: the syntax from UnmarshalCaddyfile's doc comment, and
// each subdirective's entry from the doc comment of the Handler field that it sets, which is
// also what caddyserver.com shows for the JSON. Which field a subdirective sets is not written
// down a second time: the test parses each line of the syntax block and looks.

const configurationDoc = "../docs/configuration.md"

// syntaxLine is one line of the syntax block: a subdirective and its arguments as the block
// writes them (<n>, on|off), with the lines of its block.
type syntaxLine struct {
	name  string
	args  []string
	block []syntaxLine
}

// caddyfileSyntax is the syntax block of UnmarshalCaddyfile's doc comment, as caddy fmt writes it.
func caddyfileSyntax(t *testing.T) string {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), "caddyfile.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, decl := range file.Decls {
		if fn, ok := decl.(*ast.FuncDecl); ok && fn.Name.Name == "UnmarshalCaddyfile" && fn.Doc != nil {
			for _, block := range new(comment.Parser).Parse(fn.Doc.Text()).Content {
				if code, ok := block.(*comment.Code); ok {
					return string(caddyfile.Format([]byte(code.Text)))
				}
			}
		}
	}
	t.Fatal("caddyfile.go: UnmarshalCaddyfile's doc comment has no syntax block")
	return ""
}

// syntaxLines reads the subdirectives of a syntax block as caddy fmt writes it (a tab a level).
func syntaxLines(t *testing.T, syntax string) []syntaxLine {
	t.Helper()
	lines := strings.Split(strings.TrimSuffix(syntax, "\n"), "\n")
	if len(lines) < 3 || !strings.HasPrefix(lines[0], "posts ") || lines[len(lines)-1] != "}" {
		t.Fatalf("the syntax block is not one posts block:\n%s", syntax)
	}
	var subdirs []syntaxLine
	for _, line := range lines[1 : len(lines)-1] {
		words := strings.Fields(strings.TrimSuffix(line, "{"))
		if len(words) == 0 || words[0] == "}" {
			continue
		}
		l := syntaxLine{name: words[0], args: words[1:]}
		switch depth := len(line) - len(strings.TrimLeft(line, "\t")); {
		case depth == 1:
			subdirs = append(subdirs, l)
		case depth == 2 && len(subdirs) > 0:
			subdirs[len(subdirs)-1].block = append(subdirs[len(subdirs)-1].block, l)
		default:
			t.Fatalf("the syntax block's line %q is nested deeper than the parser reads", line)
		}
	}
	return subdirs
}

// samples are arguments the parser takes for each placeholder of the syntax block, tried in turn
// until one parses and sets a field: events_ttl takes no 1s, introspection on sets nothing.
// A placeholder written a|b tries a, then b.
var samples = map[string][]string{
	"<uri>": {"mongodb://db.example"}, "<name>": {"sample"}, "<path>": {"/sample"},
	"<url...>": {"https://id.example/jwks.json"}, "<iss...>": {"https://id.example/"}, "<aud...>": {"sample"},
	"<alg...>": {"PS512"}, "<claim>": {"sample"}, "<duration>": {"1s", "1m", "1h"},
	"<key>|sha256:<hex>": {"{env.SAMPLE_KEY}"}, "<user-id>": {"sample-user"}, "<email>": {"sample@id.example"},
	"<size>": {"1KiB"}, "<n>": {"1000"}, "<pattern...>": {"app.example"}, "<manifest.json>": {"manifest.json"},
}

// sampleArgs is the k-th choice of arguments for placeholders, and false once there is none left.
func sampleArgs(t *testing.T, placeholders []string, k int) ([]string, bool) {
	t.Helper()
	args, more := make([]string, len(placeholders)), false
	for i, p := range placeholders {
		choices, ok := samples[p]
		if !ok && strings.Contains(p, "|") && !strings.Contains(p, "<") {
			choices, ok = strings.Split(p, "|"), true
		}
		if !ok {
			t.Fatalf("the syntax block's placeholder %s has no sample argument: add one to samples", p)
		}
		args[i] = choices[min(k, len(choices)-1)]
		more = more || k < len(choices)
	}
	return args, more || k == 0
}

// parsePosts parses a posts block of the given lines.
func parsePosts(lines string) (*Handler, error) {
	h := new(Handler)
	err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("posts {\n" + lines + "\n}"))
	return h, err
}

// setFields are the indexes of v's exported fields that are not zero.
func setFields(v reflect.Value) []int {
	var set []int
	for i := range v.NumField() {
		if v.Type().Field(i).IsExported() && !v.Field(i).IsZero() {
			set = append(set, i)
		}
	}
	return set
}

// sets tries line with each choice of sample arguments, through parse, which gives the struct
// the line sets fields of; it returns the index of the one field set, and the arguments that set
// it. It fails the test when no choice parses and sets exactly one field.
func sets(t *testing.T, line syntaxLine, parse func(args []string) (reflect.Value, error)) (int, []string) {
	t.Helper()
	var why error
	for k := 0; ; k++ {
		args, ok := sampleArgs(t, line.args, k)
		if !ok {
			break
		}
		v, err := parse(args)
		if err != nil {
			why = err
			continue
		}
		set := setFields(v)
		if len(set) == 1 {
			return set[0], args
		}
		why = fmt.Errorf("%s %s sets %d fields", line.name, strings.Join(args, " "), len(set))
	}
	t.Errorf("the syntax block's line %s %s: no sample arguments parse and set one field: %v",
		line.name, strings.Join(line.args, " "), why)
	return -1, nil
}

// subdirective is what the reference says of one subdirective.
type subdirective struct {
	line      syntaxLine
	field     int            // the field of Handler it sets
	args      []string       // sample arguments that set it
	arguments map[int]int    // for a field of objects (api_key): the argument that sets each field of one
	block     map[int]string // and the subdirective of the block that sets each
}

// subdirectivesOfTheSyntax parses every line of the syntax block and finds the field each sets.
func subdirectivesOfTheSyntax(t *testing.T) []subdirective {
	t.Helper()
	var out []subdirective
	for _, line := range syntaxLines(t, caddyfileSyntax(t)) {
		s := subdirective{line: line}
		s.field, s.args = sets(t, line, func(args []string) (reflect.Value, error) {
			h, err := parsePosts(line.name + " " + strings.Join(args, " "))
			return reflect.ValueOf(h).Elem(), err
		})
		if s.field < 0 {
			continue
		}
		if len(line.block) > 0 {
			s.arguments, s.block = blockFields(t, s)
		}
		out = append(out, s)
	}
	return out
}

// blockFields finds, for a subdirective with a block (api_key), which field of the element it
// appends each of its arguments sets, and which each subdirective of its block sets.
func blockFields(t *testing.T, s subdirective) (arguments map[int]int, block map[int]string) {
	t.Helper()
	head := s.line.name + " " + strings.Join(s.args, " ")
	element := func(lines string) (reflect.Value, error) {
		h, err := parsePosts(lines)
		if err != nil {
			return reflect.Value{}, err
		}
		if v := reflect.ValueOf(h).Elem().Field(s.field); v.Kind() == reflect.Slice && v.Len() == 1 && v.Index(0).Kind() == reflect.Struct {
			return v.Index(0), nil
		}
		return reflect.Value{}, fmt.Errorf("%s does not add one object to %s", head, reflect.TypeFor[Handler]().Field(s.field).Name)
	}
	plain, err := element(head)
	if err != nil {
		t.Errorf("%v", err)
		return nil, nil
	}
	arguments = map[int]int{}
	for k, arg := range s.args {
		for i := range plain.NumField() {
			if plain.Field(i).Kind() == reflect.String && plain.Field(i).String() == arg {
				arguments[i] = k
			}
		}
	}
	block = map[int]string{}
	for _, sub := range s.line.block {
		i, _ := sets(t, sub, func(args []string) (reflect.Value, error) {
			v, err := element(head + " {\n" + sub.name + " " + strings.Join(args, " ") + "\n}")
			if err != nil {
				return v, err
			}
			changed := reflect.New(v.Type()).Elem() // the fields that differ from the plain element
			for j := range v.NumField() {
				if !reflect.DeepEqual(v.Field(j).Interface(), plain.Field(j).Interface()) {
					changed.Field(j).Set(v.Field(j))
				}
			}
			return changed, nil
		})
		if i >= 0 {
			block[i] = sub.name
		}
	}
	return arguments, block
}

// fieldDoc is a struct field's doc comment, unwrapped; fields declared under one comment share it.
type fieldDoc struct {
	json   []string // the JSON names of the fields it documents
	index  []int    // and their indexes in the struct
	text   string
	goType reflect.Type // of the first
}

// fieldDocs reads the doc comments of the exported fields of typ, a struct of config.go, in
// their order.
func fieldDocs(t *testing.T, typ reflect.Type) []fieldDoc {
	t.Helper()
	file, err := parser.ParseFile(token.NewFileSet(), "config.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var docs []fieldDoc
	ast.Inspect(file, func(n ast.Node) bool {
		spec, ok := n.(*ast.TypeSpec)
		if !ok || spec.Name.Name != typ.Name() {
			return true
		}
		for _, field := range spec.Type.(*ast.StructType).Fields.List {
			for _, name := range field.Names {
				f, ok := typ.FieldByName(name.Name)
				json, _, _ := strings.Cut(f.Tag.Get("json"), ",")
				switch {
				case !ok || !f.IsExported() || json == "":
					continue
				case (field.Doc == nil || name != field.Names[0]) && len(docs) > 0:
					// Under the comment of the field above, as APIKey's Name and Email.
					last := &docs[len(docs)-1]
					last.json, last.index = append(last.json, json), append(last.index, f.Index[0])
				case field.Doc == nil:
					t.Errorf("config.go: %s.%s has no doc comment", typ.Name(), name.Name)
				default:
					docs = append(docs, fieldDoc{json: []string{json}, index: f.Index,
						text: strings.Join(strings.Fields(field.Doc.Text()), " "), goType: f.Type})
				}
			}
		}
		return false
	})
	if len(docs) == 0 {
		t.Fatalf("config.go declares no struct %s with documented fields", typ.Name())
	}
	return docs
}

// markdown makes a doc comment's text Markdown: the words that are code (names with an
// underscore, URLs, paths, placeholders, patterns) go in backticks, where Markdown neither takes
// an underscore or an asterisk for emphasis nor makes a link; the rest is escaped.
func markdown(t *testing.T, text string) string {
	t.Helper()
	words := strings.Fields(text)
	for k, word := range words {
		core := strings.TrimLeft(word, `("`)
		lead := word[:len(word)-len(core)]
		core = strings.TrimRight(core, `.,;:)"`)
		trail := word[len(lead)+len(core):]
		switch {
		case core == "":
		case strings.ContainsAny(core, "_*") || strings.Contains(core, "://") || strings.ContainsAny(core[:1], "/{?"):
			if strings.Contains(core, "`") {
				t.Errorf("config.go: the doc comment word %s has a backtick, which Markdown cannot show in code", word)
			}
			words[k] = lead + "`" + core + "`" + trail
		default:
			words[k] = strings.NewReplacer(`\`, `\\`, "`", "\\`", "<", `\<`, "[", `\[`, "]", `\]`).Replace(word)
		}
	}
	return strings.Join(words, " ")
}

// jsonType names the JSON type of a field of Handler; placeholder is its Caddyfile argument.
func jsonType(typ reflect.Type, placeholder string) string {
	switch {
	case typ == reflect.TypeFor[caddy.Duration]() || typ == reflect.TypeFor[*caddy.Duration]():
		return `duration (nanoseconds, or a string such as "5s")`
	case typ.Kind() == reflect.Int || typ.Kind() == reflect.Int64:
		if placeholder == "<size>" {
			return "integer (bytes)"
		}
		return "integer"
	case typ.Kind() == reflect.String:
		return "string"
	case typ.Kind() == reflect.Bool:
		return "boolean"
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.String:
		return "array of strings"
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.Struct:
		return "array of objects"
	}
	return ""
}

// seeAlso is the page that explains a field, which a doc comment cannot link to.
var seeAlso = map[string]string{
	"mongodb_uri":                "[Storage](storage.md)",
	"synchronous":                "[Storage](storage.md)",
	"post_cache_size":            "[Storage](storage.md)",
	"jwks_urls":                  "[Authentication](authentication.md#with-an-identity-provider)",
	"trust_caddy_auth":           "[Authentication](authentication.md#behind-caddys-own-authentication)",
	"api_keys":                   "[Authentication](authentication.md#with-api-keys)",
	"max_cost":                   "[GraphQL limits](graphql.md#limits)",
	"document_cache_entries":     "[Persisted queries and the document cache](graphql.md#persisted-queries-and-the-document-cache)",
	"persisted_queries":          "[Persisted queries and the document cache](graphql.md#persisted-queries-and-the-document-cache)",
	"subscriptions_require_auth": "[Subscriptions](subscriptions.md)",
	"allowed_origins":            "[From another origin](subscriptions.md#from-another-origin-cors)",
	"sse_max_duration":           "[Subscriptions over HTTP](subscriptions.md#subscriptions-over-http-sse-and-multipart)",
	"health_path":                "[Health](operations.md#health)",
	"openapi_path":               "[The REST API](rest.md)",
	"idempotency_ttl":            "[Idempotent creates](rest.md#idempotent-creates)",
	"events":                     "[Several instances](scaling.md)",
	"max_resume_events":          "[Resuming after a disconnect](subscriptions.md#resuming-after-a-disconnect)",
}

var ordinals = []string{"first", "second", "third"}

// reference writes the entry of every field of Handler, in the order Handler declares them.
func reference(t *testing.T, subdirs []subdirective) string {
	t.Helper()
	byField := map[int]subdirective{}
	for _, s := range subdirs {
		if other, ok := byField[s.field]; ok {
			t.Errorf("%s and %s both set %s", other.line.name, s.line.name, reflect.TypeFor[Handler]().Field(s.field).Name)
		}
		byField[s.field] = s
	}
	typ := reflect.TypeFor[Handler]()
	var b strings.Builder
	for _, doc := range fieldDocs(t, typ) {
		if len(doc.json) > 1 {
			t.Errorf("config.go: Handler's %s share one doc comment; give each its own", strings.Join(doc.json, ", "))
		}
		s, ok := byField[doc.index[0]]
		if !ok {
			t.Errorf("no line of the syntax block sets the JSON field %s: the Caddyfile cannot set it", doc.json[0])
			continue
		}
		placeholder := ""
		if len(s.line.args) > 0 {
			placeholder = s.line.args[0]
		}
		kind := jsonType(doc.goType, placeholder)
		if kind == "" {
			t.Errorf("%s: no JSON type is known for a %s", doc.json[0], doc.goType)
		}
		fmt.Fprintf(&b, "\n### `%s`\n\n`%s`", s.line.name, strings.Join(append([]string{s.line.name}, s.line.args...), " "))
		if repeatable[s.line.name] {
			b.WriteString(", repeatable")
		}
		if len(s.line.block) > 0 {
			var subs []string
			for _, sub := range s.line.block {
				subs = append(subs, "`"+strings.Join(append([]string{sub.name}, sub.args...), " ")+"`")
			}
			fmt.Fprintf(&b, ", with an optional block of %s", strings.Join(subs, " and "))
		}
		fmt.Fprintf(&b, " · JSON `%s`: %s", doc.json[0], kind)
		if doc.goType.Kind() == reflect.Bool && len(s.args) > 0 {
			fmt.Fprintf(&b, "; `%s %s` is `true`", s.line.name, strings.Join(s.args, " "))
		}
		b.WriteString("\\\n" + markdown(t, doc.text))
		if page, ok := seeAlso[doc.json[0]]; ok {
			b.WriteString(" See " + page + ".")
		}
		b.WriteString("\n")
		if len(s.line.block) > 0 {
			b.WriteString(elementFields(t, s, doc.goType.Elem()))
		}
	}
	return b.String()
}

// elementFields lists the fields of the objects a subdirective with a block appends (api_key's),
// each with where the Caddyfile sets it.
func elementFields(t *testing.T, s subdirective, typ reflect.Type) string {
	t.Helper()
	var b strings.Builder
	b.WriteString("\n")
	for _, doc := range fieldDocs(t, typ) {
		var names, where []string
		for k, json := range doc.json {
			names = append(names, "`"+json+"`")
			if arg, ok := s.arguments[doc.index[k]]; ok && arg < len(ordinals) {
				where = append(where, "the "+ordinals[arg]+" argument")
			} else if sub, ok := s.block[doc.index[k]]; ok && sub == json {
				where = append(where, "in the block")
			} else if ok {
				where = append(where, "`"+sub+"` in the block")
			} else {
				t.Errorf("the Caddyfile sets %s's %s neither by an argument of %s nor in its block", typ.Name(), json, s.line.name)
			}
		}
		fmt.Fprintf(&b, "- %s (%s): %s\n", strings.Join(names, ", "), strings.Join(slices.Compact(where), ", "), markdown(t, doc.text))
	}
	return b.String()
}

// TestTheConfigurationReferenceIsTheCode generates docs/configuration.md's syntax block and its
// entry for every subdirective, and checks that the syntax block, the parser and Handler agree:
// every subdirective the parser knows is in the syntax block, every line of the block parses and
// sets one field of Handler, in the order Handler declares them, and every field is set by one.
func TestTheConfigurationReferenceIsTheCode(t *testing.T) {
	subdirs := subdirectivesOfTheSyntax(t)
	t.Run("the syntax block lists the subdirectives the parser knows", func(t *testing.T) {
		var listed []string
		for _, s := range subdirs {
			listed = append(listed, s.line.name)
		}
		for name := range subdirectives {
			if !slices.Contains(listed, name) {
				t.Errorf("the parser knows %s, which the syntax block of UnmarshalCaddyfile's doc comment lacks", name)
			}
		}
		for _, name := range listed {
			if _, ok := subdirectives[name]; !ok {
				t.Errorf("the syntax block lists %s, which the parser does not know", name)
			}
		}
	})
	t.Run("the syntax block lists them in the order Handler declares their fields", func(t *testing.T) {
		for k := 1; k < len(subdirs); k++ {
			if subdirs[k].field < subdirs[k-1].field {
				t.Errorf("the syntax block lists %s after %s, whose field Handler declares after it",
					subdirs[k].line.name, subdirs[k-1].line.name)
			}
		}
	})
	syntax := caddyfileSyntax(t)
	docgen.Region(t, configurationDoc, "caddymodule (syntax)", "./caddymodule/", "```caddyfile syntax\n"+syntax+"```\n")
	docgen.Region(t, configurationDoc, "caddymodule (subdirectives)", "./caddymodule/", reference(t, subdirs)+"\n")
}

func TestDocCommentsBecomeMarkdown(t *testing.T) {
	tests := []struct{ name, text, want string }{
		{"a name with an underscore goes in backticks, its punctuation outside",
			"every jwks_refresh. Default: 1h.", "every `jwks_refresh`. Default: 1h."},
		{"a placeholder, a URL and a path go in backticks",
			"as {env.MONGODB_URI}, https://id.example/keys or /healthz,", "as `{env.MONGODB_URI}`, `https://id.example/keys` or `/healthz`,"},
		{"a word that Markdown would take for emphasis goes in backticks",
			"(__schema and __type); *.example.com", "(`__schema` and `__type`); `*.example.com`"},
		{"a bracket or an angle bracket of plain text is escaped", "a [b] <c>", `a \[b\] \<c>`},
		{"the lines of a comment become one paragraph", "one\ntwo  three", "one two three"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := markdown(t, tt.text); got != tt.want {
				t.Errorf("markdown(%q) = %q, want %q", tt.text, got, tt.want)
			}
		})
	}
}
