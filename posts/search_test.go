package posts

import (
	"strings"
	"testing"
	"time"
)

// A search is refused, naming the parameter it came in, when it is too long, has too many words
// or none; its syntax is plain text.
func TestParseSearch(t *testing.T) {
	s := NewService(Config{MaxSearchTerms: 3})
	refused := []struct{ name, q string }{
		{"a search one byte over MaxSearchBytes", strings.Repeat("a", MaxSearchBytes+1)},
		{"a search of more words than MaxSearchTerms", "one two three four"},
		{"a search of punctuation alone", `"*" - : ^ ( )`},
		{"a search of emoji alone", "🚀🔥"},
		{"a search of spaces alone", "   "},
		{"an empty search", ""},
	}
	for _, tc := range refused {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			_, err := s.ParseSearch("q", tc.q)
			wantInvalid(t, err, "q")
			if err != nil && !strings.HasPrefix(err.Error(), "q ") {
				t.Errorf("the message %q does not open with the parameter's name", err)
			}
		})
	}
	accepted := []struct{ name, q, want string }{
		{"a search of MaxSearchBytes", strings.Repeat("a", MaxSearchBytes), strings.Repeat("a", 64)},
		{"MaxSearchTerms words, one of them repeated", "one two one three", "two one three"},
		{"operators and quotes as plain text", `"edge" NOT (caddy*)`, "edge not caddy"},
		{"case and accents folded", "ÉDGE Straße", "edge strasse"},
	}
	for _, tc := range accepted {
		t.Run(tc.name+" is accepted", func(t *testing.T) {
			q, err := s.ParseSearch("q", tc.q)
			if err != nil || strings.Join(q.Words, " ") != tc.want {
				t.Errorf("ParseSearch(%q) = %q, %v; want %q", tc.q, q.Words, err, tc.want)
			}
		})
	}
	if d := NewService(Config{}); d.maxSearchTerms != DefaultMaxSearchTerms {
		t.Errorf("the default limit of words is %d; want %d", d.maxSearchTerms, DefaultMaxSearchTerms)
	}
}

// A time range must not be empty: since before until, compared as stored, to the millisecond.
func TestAnEmptyTimeRangeIsRefused(t *testing.T) {
	s := NewService(Config{MaxLimit: 10})
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name         string
		since, until time.Time
	}{
		{"since equal to until", at, at},
		{"since after until", at.Add(time.Second), at},
		{"since and until within one millisecond", at.Add(100 * time.Microsecond), at.Add(900 * time.Microsecond)},
	} {
		t.Run(tc.name+" is refused", func(t *testing.T) {
			_, err := s.List(t.Context(), ListQuery{Since: tc.since, Until: tc.until})
			wantInvalid(t, err, "since")
		})
	}
}

// A time that is not RFC 3339, or that is no later than the zero time.Time (no bound), is
// refused naming its parameter.
func TestParseTime(t *testing.T) {
	for _, s := range []string{"yesterday", "2026-11-30", "2026-11-30T10:00:00", "0001-01-01T00:00:00Z", "0000-12-31T23:59:59.9999Z", "0001-01-01T01:00:00+02:00"} {
		if _, err := ParseTime("until", s); err == nil || !strings.HasPrefix(err.Error(), "until ") {
			t.Errorf("ParseTime(%q) = %v; want an error naming until", s, err)
		} else {
			wantInvalid(t, err, "until")
		}
	}
	for _, s := range []string{"0001-01-01T00:00:00.001Z", "2026-11-30T10:00:00.5+01:00", "9999-12-31T23:59:59Z"} {
		if _, err := ParseTime("since", s); err != nil {
			t.Errorf("ParseTime(%q): %v", s, err)
		}
	}
}

func TestCeilMilli(t *testing.T) {
	at := time.Date(2026, 11, 30, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	for _, tc := range []struct{ in, want time.Time }{
		{time.Time{}, time.Time{}},
		{at, at.UTC()},
		{at.Add(time.Nanosecond), at.Add(time.Millisecond).UTC()},
		{at.Add(999 * time.Microsecond), at.Add(time.Millisecond).UTC()},
	} {
		if got := ceilMilli(tc.in); !got.Equal(tc.want) || !tc.want.IsZero() && got.Location() != time.UTC {
			t.Errorf("ceilMilli(%v) = %v; want %v in UTC", tc.in, got, tc.want)
		}
	}
}
