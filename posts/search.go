package posts

import (
	"time"

	"github.com/postsedge/caddy-posts/store/words"
)

// MaxSearchBytes is the longest text a search may be, in bytes.
const MaxSearchBytes = 256

// DefaultMaxSearchTerms is how many words a search may have when Config.MaxSearchTerms is 0.
const DefaultMaxSearchTerms = 8

// ParseSearch reads the words of a search from q, the text a client sent as the parameter
// param, by the rules of package words: plain text, whose quotes, operators and punctuation
// separate words and mean nothing else. It refuses a q longer than MaxSearchBytes, one with more
// words than the service's limit (Config.MaxSearchTerms), and one with no letter or digit (an
// empty one too), each with an error naming param.
func (s *Service) ParseSearch(param, q string) (words.Query, error) {
	if len(q) > MaxSearchBytes {
		return words.Query{}, invalid(param, "%s is %d bytes long; a search has at most %d", param, len(q), MaxSearchBytes)
	}
	parsed := words.Parse(q)
	switch {
	case parsed.Empty():
		return words.Query{}, invalid(param, "%s has no letter or digit to search for", param)
	case len(parsed.Words) > s.maxSearchTerms:
		return words.Query{}, invalid(param, "%s has %d words; a search has at most %d", param, len(parsed.Words), s.maxSearchTerms)
	}
	return parsed, nil
}

// ParseTime reads s, the time a client sent as the parameter param of a list (since, until):
// RFC 3339, with any fraction of a second and offset, after the first millisecond of the year
// 1 (the zero time.Time means no bound); anything else is refused with an error naming param.
func ParseTime(param, s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	switch {
	case err != nil:
		return time.Time{}, invalid(param, "%s must be an RFC 3339 time, such as 2026-11-30T09:30:00Z", param)
	case !ceilMilli(t).After(time.Time{}):
		return time.Time{}, invalid(param, "%s must be after 0001-01-01T00:00:00Z", param)
	}
	return t, nil
}

// TimeRange is the range of creation times that since (inclusive) and until (exclusive)
// bound, as a list selects its posts by them (a zero time bounds nothing), rounded up to the
// millisecond (ceilMilli); since not before until is an *InvalidError of field since.
func TimeRange(since, until time.Time) (time.Time, time.Time, error) {
	since, until = ceilMilli(since), ceilMilli(until)
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		return since, until, invalid("since", "since must be before until")
	}
	return since, until, nil
}

// CreatedWithin returns whether p was created within the range since and until give, as a
// list of them would hold it, for the subscriptions that follow such a list; the same error as
// TimeRange.
func CreatedWithin(since, until time.Time) (func(p Post) bool, error) {
	since, until, err := TimeRange(since, until)
	if err != nil {
		return nil, err
	}
	return func(p Post) bool {
		return (since.IsZero() || !p.CreatedAt.Before(since)) && (until.IsZero() || p.CreatedAt.Before(until))
	}, nil
}

// ceilMilli is t rounded up to the millisecond, in UTC: times are stored to the millisecond,
// so a post is created at or after t exactly when it is at or after ceilMilli(t).
func ceilMilli(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	c := t.UTC().Truncate(time.Millisecond)
	if c.Before(t) {
		c = c.Add(time.Millisecond)
	}
	return c
}
