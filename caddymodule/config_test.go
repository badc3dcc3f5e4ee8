package caddymodule

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/dustin/go-humanize"

	"github.com/postsedge/caddy-posts/internal/docgen"
)

// configFieldIndex maps the JSON name of each config field of Handler to its index.
func configFieldIndex(t *testing.T) map[string]int {
	t.Helper()
	index := map[string]int{}
	typ := reflect.TypeFor[Handler]()
	for i := range typ.NumField() {
		if name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ","); name != "" && typ.Field(i).IsExported() {
			index[name] = i
		}
	}
	if len(index) == 0 {
		t.Fatal("Handler has no config fields")
	}
	return index
}

// documentedDefaults reads the "Default: ..." of each config field's doc comment in config.go,
// up to the first full stop, comma or parenthesis.
func documentedDefaults(t *testing.T) map[string]string {
	t.Helper()
	defaults := map[string]string{}
	for _, doc := range fieldDocs(t, reflect.TypeFor[Handler]()) {
		_, phrase, ok := strings.Cut(doc.text, "Default: ")
		if !ok {
			t.Errorf("the doc comment of %s states no default", doc.json[0])
			continue
		}
		for _, end := range []string{". ", ", ", " ("} {
			phrase, _, _ = strings.Cut(phrase, end)
		}
		defaults[doc.json[0]] = strings.TrimSuffix(strings.TrimSpace(phrase), ".")
	}
	return defaults
}

// parseDefault reads a documented default as a value of typ, as the Caddyfile would.
func parseDefault(typ reflect.Type, text string) (reflect.Value, error) {
	if typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch {
	case typ == reflect.TypeFor[caddy.Duration]():
		d, err := caddy.ParseDuration(text)
		return reflect.ValueOf(caddy.Duration(d)), err
	case typ.Kind() == reflect.String:
		return reflect.ValueOf(text), nil
	case typ.Kind() == reflect.Slice && typ.Elem().Kind() == reflect.String:
		return reflect.ValueOf(strings.Fields(text)), nil
	case typ.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(text)
		return reflect.ValueOf(b), err
	case typ.Kind() == reflect.Int || typ.Kind() == reflect.Int64:
		n, err := humanize.ParseBytes(text) // a count, or a size such as 16 KiB
		return reflect.ValueOf(n).Convert(typ), err
	}
	return reflect.Value{}, fmt.Errorf("no reading of a %s", typ)
}

// filled is a zero Handler with its defaults filled in.
func filled() *Handler {
	h := new(Handler)
	h.fillDefaults()
	return h
}

// valueOf is the value of h's field i, through a pointer; the zero value for a nil one.
func valueOf(h *Handler, i int) reflect.Value {
	v := reflect.ValueOf(h).Elem().Field(i)
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return reflect.Zero(v.Type().Elem())
		}
		v = v.Elem()
	}
	return v
}

func TestConfigFieldsNameTheConfigInDeclarationOrder(t *testing.T) {
	index := configFieldIndex(t)
	last, lastName := -1, ""
	for _, f := range configFields {
		i, ok := index[f.name]
		switch {
		case !ok:
			t.Errorf("configFields names %q, which is no config field of Handler", f.name)
		case i <= last:
			t.Errorf("configFields names %q after %q, but Handler declares it before", f.name, lastName)
		default:
			last, lastName = i, f.name
		}
		if f.fill == nil && f.check == nil {
			t.Errorf("configFields names %q with neither a default nor a rule", f.name)
		}
	}
}

// TestAZeroHandlerTakesTheDocumentedDefaults fills a zero Handler and compares each config field
// with the "Default:" of its doc comment; a field documented with a default that is not the zero
// value must have a fill in configFields, and one whose default is zero must have none.
func TestAZeroHandlerTakesTheDocumentedDefaults(t *testing.T) {
	// The documented defaults that are words rather than values, and what they stand for; nil
	// is the zero value.
	words := map[string]any{
		"none": nil, "any issuer": nil, "any audience": nil, "the site's own origin only": nil,
		`the "posts" folder in Caddy's data directory`: filepath.Join(caddy.AppDataDir(), "posts"),
		"a tenth of max_distinct_subscriptions":        100,
		"local without mongodb_uri":                    EventsLocal,
	}
	fills := map[string]bool{}
	for _, f := range configFields {
		fills[f.name] = f.fill != nil
	}
	h := filled()
	typ := reflect.TypeFor[Handler]()
	documented := documentedDefaults(t)
	for name, i := range configFieldIndex(t) {
		t.Run(name+" holds its documented default", func(t *testing.T) {
			text, ok := documented[name]
			if !ok {
				t.Fatal("the doc comment states no default")
			}
			got := valueOf(h, i)
			var want reflect.Value
			if word, ok := words[text]; ok {
				want = reflect.Zero(got.Type())
				if word != nil {
					want = reflect.ValueOf(word).Convert(got.Type())
				}
			} else {
				var err error
				if want, err = parseDefault(typ.Field(i).Type, text); err != nil {
					t.Fatalf("the documented default %q is not a value: %v", text, err)
				}
			}
			if !reflect.DeepEqual(got.Interface(), want.Interface()) {
				t.Errorf("after fillDefaults = %v; the doc comment says %q (%v)", got, text, want)
			}
			switch hasDefault := !want.IsZero(); {
			case hasDefault && !fills[name]:
				t.Errorf("the documented default is %q, which configFields does not fill", text)
			case !hasDefault && fills[name]:
				t.Errorf("the documented default is %q (unset), yet configFields fills it", text)
			}
		})
	}
}

// TestTheDocumentsTablesStateTheDefaults reads every table row of the Markdown documents shaped
// | `name` | default | ... whose name is a subdirective (or | `a`, `b` | `1`, `2` | ... for
// several), and checks each default that is a value in backticks as the Caddyfile would take it:
// the line "name value" then fillDefaults must give the config that no line gives. Words
// ("none", "off", "a tenth of it") are not values and are left to the doc comments' test.
func TestTheDocumentsTablesStateTheDefaults(t *testing.T) {
	documents, err := docgen.Documents("..")
	if err != nil {
		t.Fatal(err)
	}
	defaults := filled()
	checked := 0
	for _, document := range documents {
		if document == "CHANGELOG.md" {
			continue // it states the defaults of its day
		}
		text, err := os.ReadFile(filepath.Join("..", document))
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(text), "\n") {
			cells := strings.Split(line, " | ")
			if !strings.HasPrefix(line, "| `") || len(cells) < 3 {
				continue
			}
			where := fmt.Sprintf("%s:%d", document, n+1)
			names := strings.Split(strings.TrimPrefix(cells[0], "| "), ", ")
			values := []string{cells[1]}
			if len(names) > 1 { // one default for each
				values = strings.Split(cells[1], ", ")
			}
			for k, quoted := range names {
				name := strings.Trim(quoted, "`")
				if _, ok := subdirectives[name]; !ok {
					break // a table of something else: error codes, metrics
				}
				if len(values) != len(names) {
					t.Errorf("%s: the row of %s gives %d defaults for %d subdirectives", where, name, len(values), len(names))
					break
				}
				value, ok := strings.CutPrefix(values[k], "`")
				if !ok || strings.Contains(value, "<") {
					continue // not a value: "a tenth of it", "<Caddy's data directory>/posts"
				}
				value, _, _ = strings.Cut(value, "`")
				h, err := parsePosts(name + " " + value)
				if err != nil {
					t.Errorf("%s: the default of %s, %q, is no value the Caddyfile takes: %v", where, name, value, err)
					continue
				}
				h.fillDefaults()
				if differs := differingFields(t, h, defaults); len(differs) > 0 {
					t.Errorf("%s: the default of %s is %q; but %s %s gives %s", where, name, value, name, value, strings.Join(differs, ", "))
				}
				checked++
			}
		}
	}
	// The tables of graphql.md, subscriptions.md and security.md hold more than this; fewer
	// means their shape changed and the reading no longer finds them.
	if checked < 10 {
		t.Errorf("only %d defaults found in the documents' tables; has their shape changed?", checked)
	}
}

// differingFields says, for each config field in which h differs from defaults, both values.
func differingFields(t *testing.T, h, defaults *Handler) []string {
	var names []string
	for name, i := range configFieldIndex(t) {
		if got, want := valueOf(h, i).Interface(), valueOf(defaults, i).Interface(); !reflect.DeepEqual(got, want) {
			names = append(names, fmt.Sprintf("%s %v where the default is %v", name, got, want))
		}
	}
	slices.Sort(names)
	return names
}

func TestDerivedDefaultsFollowTheFieldTheyDeriveFrom(t *testing.T) {
	tests := []struct {
		name string
		set  Handler
		want func(h *Handler) (got, want int)
	}{
		{"max_connections of 500 gives max_connections_per_user 50", Handler{MaxConnections: 500},
			func(h *Handler) (int, int) { return h.MaxConnectionsPerUser, 50 }},
		{"max_connections of 5 gives max_connections_per_user 1", Handler{MaxConnections: 5},
			func(h *Handler) (int, int) { return h.MaxConnectionsPerUser, 1 }},
		{"max_connections of a million gives max_connections_per_user 100", Handler{MaxConnections: 1_000_000},
			func(h *Handler) (int, int) { return h.MaxConnectionsPerUser, 100 }},
		{"max_connections unset (10000) gives max_connections_per_user 100", Handler{},
			func(h *Handler) (int, int) { return h.MaxConnectionsPerUser, 100 }},
		{"max_connections of 50000 gives max_connections_per_user 100", Handler{MaxConnections: 50_000},
			func(h *Handler) (int, int) { return h.MaxConnectionsPerUser, 100 }},
		{"max_connections of 10 gives max_connections_per_user 1", Handler{MaxConnections: 10},
			func(h *Handler) (int, int) { return h.MaxConnectionsPerUser, 1 }},
		{"max_connections of 3 gives max_connections_per_user 1", Handler{MaxConnections: 3},
			func(h *Handler) (int, int) { return h.MaxConnectionsPerUser, 1 }},
		{"a set max_connections_per_user is kept", Handler{MaxConnections: 500, MaxConnectionsPerUser: 7},
			func(h *Handler) (int, int) { return h.MaxConnectionsPerUser, 7 }},
		{"max_distinct_subscriptions of 30 gives 3 per client", Handler{MaxDistinctSubscriptions: 30},
			func(h *Handler) (int, int) { return h.MaxDistinctSubscriptionsPerClient, 3 }},
		{"max_distinct_subscriptions of 5 gives 1 per client", Handler{MaxDistinctSubscriptions: 5},
			func(h *Handler) (int, int) { return h.MaxDistinctSubscriptionsPerClient, 1 }},
		{"max_response_size of 64MiB gives max_memory_per_client 64MiB", Handler{MaxResponseSize: 64 << 20},
			func(h *Handler) (int, int) { return int(h.MaxMemoryPerClient), 64 << 20 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.set
			h.fillDefaults()
			if got, want := tt.want(&h); got != want {
				t.Errorf("got %d, want %d", got, want)
			}
		})
	}
}

// broken sets the field i of h to a value no rule accepts.
func broken(t *testing.T, h *Handler, i int) {
	t.Helper()
	v := reflect.ValueOf(h).Elem().Field(i)
	switch {
	case v.Kind() == reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		p.Elem().SetInt(-1)
		v.Set(p)
	case v.Kind() == reflect.Int || v.Kind() == reflect.Int64:
		v.SetInt(-1)
	case v.Kind() == reflect.String:
		v.SetString("no such value.")
	case v.Kind() == reflect.Slice:
		v.Set(reflect.ValueOf([]string{"none"}))
	default:
		t.Fatalf("no broken value of a %s", v.Type())
	}
}

func TestMaxMemoryPerClientHoldsAResponseAtLeast(t *testing.T) {
	h := filled()
	h.MaxMemoryPerClient = 1 << 20
	want := "max_memory_per_client (1048576 bytes) must be at least max_response_size (8388608 bytes)"
	if err := h.Validate(); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Validate() = %v; want %q", err, want)
	}
}

func TestValidateReportsEachFieldInDeclarationOrder(t *testing.T) {
	t.Run("the defaults pass every rule", func(t *testing.T) {
		if err := filled().Validate(); err != nil {
			t.Errorf("Validate() = %v", err)
		}
	})
	index := configFieldIndex(t)
	h := filled()
	var want []string
	for _, f := range configFields {
		if f.check != nil {
			broken(t, h, index[f.name])
			want = append(want, f.name)
		}
	}
	first := h.Validate()
	if first == nil {
		t.Fatal("Validate() = nil for a config with every field broken")
	}
	lines := strings.Split(first.Error(), "\n")
	if len(lines) != len(want) {
		t.Fatalf("Validate() gave %d errors for %d broken fields:\n%v", len(lines), len(want), first)
	}
	for k, line := range lines {
		if !strings.HasPrefix(line, want[k]+" ") && !strings.HasPrefix(line, want[k]+":") {
			t.Errorf("error %d is %q; want it to name %s", k, line, want[k])
		}
	}
	t.Run("again and again, the same errors", func(t *testing.T) {
		for range 20 {
			if err := h.Validate(); err.Error() != first.Error() {
				t.Fatalf("Validate() = %q, then %q", first, err)
			}
		}
	})
	t.Run("a negative value is refused, not taken for unset", func(t *testing.T) {
		h := &Handler{MaxLimit: -1}
		h.fillDefaults()
		if err := h.Validate(); err == nil || err.Error() != "max_limit must be at least 1, not -1" {
			t.Errorf("Validate() = %v; want max_limit must be at least 1, not -1", err)
		}
	})
}
