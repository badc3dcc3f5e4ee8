package posts

import (
	"strings"
	"testing"
)

// TestControlCharacters checks the characters a title and a body may not hold, through Create
// and Update alike, as REST and GraphQL both reach them.
func TestControlCharacters(t *testing.T) {
	st := newStore(t)
	s := newService(st, 100)
	post := create(t, s, alice, "Kept as it is")

	accepted := []struct {
		name        string
		in          NewPost
		title, body string // as stored
	}{
		{"a body of several lines with tabs", NewPost{Title: "t", Body: ptr("one\n\ttwo\r\nthree")}, "t", "one\n\ttwo\r\nthree"},
		{"a title with a tab inside", NewPost{Title: "a\tb"}, "a\tb", ""},
		{"a title with a newline after it, trimmed", NewPost{Title: "Title\r\n"}, "Title", ""},
		{"a title with NEL around it, trimmed as white space", NewPost{Title: "\u0085Title\u0085"}, "Title", ""},
		{"a body with U+2028 and U+2029", NewPost{Title: "t", Body: ptr("a\u2028b\u2029c")}, "t", "a\u2028b\u2029c"},
		{"a body with U+00A0 and U+00FF, past the C1 controls", NewPost{Title: "t", Body: ptr("\u00a0\u00ff")}, "t", "\u00a0\u00ff"},
		{"a body with U+FFFD written as such", NewPost{Title: "t", Body: ptr("\ufffd")}, "t", "\ufffd"},
	}
	for _, tc := range accepted {
		t.Run(tc.name+" is stored", func(t *testing.T) {
			got, err := s.Create(t.Context(), alice, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			back := get(t, s, got.ID)
			if back.Title != tc.title || tc.body != "" && (back.Body == nil || *back.Body != tc.body) {
				t.Errorf("stored %s; want title %q, body %q", describe(back), tc.title, tc.body)
			}
		})
	}

	refused := []struct {
		name, title, body string
		field, message    string
	}{
		{"a body with NUL", "t", "a\x00b", "body", "U+0000 (character 2)"},
		{"a body with BEL", "t", "\a", "body", "U+0007 (character 1)"},
		{"a body with ESC, as in a terminal's colour codes", "t", "red: \x1b[31m", "body", "U+001B (character 6)"},
		{"a body with a vertical tab", "t", "a\vb", "body", "U+000B"},
		{"a body with a form feed", "t", "a\fb", "body", "U+000C"},
		{"a body with U+001F", "t", "\x1f", "body", "U+001F"},
		{"a body with DEL", "t", "a\x7f", "body", "U+007F (character 2)"},
		{"a body with U+0080", "t", "é\u0080", "body", "U+0080 (character 2)"},
		{"a body with NEL inside", "t", "a\u0085b", "body", "U+0085"},
		{"a body with U+009F", "t", "\u009f", "body", "U+009F"},
		{"a title with NUL", "a\x00b", "", "title", "U+0000 (character 2)"},
		{"a title with DEL", "a\x7f", "", "title", "U+007F"},
		{"a title with U+009B, the C1 escape", "a\u009b", "", "title", "U+009B"},
		{"a title with a newline inside", "two\nlines", "", "title", "one line"},
		{"a title with a carriage return inside", "two\rlines", "", "title", "one line"},
		{"a title with U+2028 inside", "two\u2028lines", "", "title", "U+2028"},
		{"a title with U+2029 inside", "two\u2029lines", "", "title", "U+2029"},
		{"a title with a control character past trimming", "\x00 ", "", "title", "U+0000"},
	}
	before := len(stored(t, st))
	for _, tc := range refused {
		var body *string
		if tc.body != "" {
			body = &tc.body
		}
		t.Run("creating a post with "+tc.name+" is invalid and nothing is stored", func(t *testing.T) {
			_, err := s.Create(t.Context(), alice, NewPost{Title: tc.title, Body: body})
			wantInvalid(t, err, tc.field)
			if err != nil && !strings.Contains(err.Error(), tc.message) {
				t.Errorf("error %q; want it to contain %q", err, tc.message)
			}
			if n := len(stored(t, st)); n != before {
				t.Errorf("the store holds %d posts, want %d as before", n, before)
			}
		})
		t.Run("updating a post with "+tc.name+" is invalid and the post is unchanged", func(t *testing.T) {
			ch := Changes{Title: Change{Set: true, Value: &tc.title}}
			if tc.field == "body" {
				ch = Changes{Body: Change{Set: true, Value: body}}
			}
			_, err := s.Update(t.Context(), alice, post.ID, ch, Expect{})
			wantInvalid(t, err, tc.field)
			if got := get(t, s, post.ID); describe(got) != describe(post) {
				t.Errorf("the post changed to\n%s\nfrom\n%s", describe(got), describe(post))
			}
		})
	}
}

func BenchmarkForbiddenRune(b *testing.B) {
	body := strings.Repeat("Ünïcödé text, with\ttabs and\nnewlines. ", MaxBodyLength/40)
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, _, found := forbiddenRune(body, false); found {
			b.Fatal("found")
		}
	}
}
