package posts

import (
	"errors"
	"testing"

	"github.com/postsedge/caddy-posts/auth"
)

func TestAllow(t *testing.T) {
	open := NewService(Config{})
	closed := NewService(Config{SubscriptionsRequireAuth: true})
	byToken := auth.Identity{UserID: "carol", Method: auth.MethodJWT}

	tests := []struct {
		name   string
		s      *Service
		caller Caller
		a      Action
		want   error
	}{
		{"an anonymous caller may read", open, anonymous, Read, nil},
		{"an anonymous caller may read when subscriptions require auth", closed, anonymous, Read, nil},
		{"an anonymous caller may not write", open, anonymous, Write, ErrUnauthenticated},
		{"an anonymous caller may not write when subscriptions require auth", closed, anonymous, Write, ErrUnauthenticated},
		{"an anonymous caller may subscribe by default", open, anonymous, Subscribe, nil},
		{"an anonymous caller may not subscribe when subscriptions require auth", closed, anonymous, Subscribe, ErrUnauthenticated},
		{"an anonymous caller may not do an action Allow does not know", open, anonymous, Subscribe + 1, ErrUnauthenticated},
		{"a caller with an API key may read", open, alice, Read, nil},
		{"a caller with an API key may write", open, alice, Write, nil},
		{"a caller with an API key may subscribe", open, alice, Subscribe, nil},
		{"a caller with an API key may subscribe when subscriptions require auth", closed, alice, Subscribe, nil},
		{"a caller with a token may read, when subscriptions require auth", closed, byToken, Read, nil},
		{"a caller with a token may write, when subscriptions require auth", closed, byToken, Write, nil},
		{"a caller with a token may subscribe when subscriptions require auth", closed, byToken, Subscribe, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.s.Allow(tc.caller, tc.a); !errors.Is(err, tc.want) {
				t.Errorf("Allow(%+v, %d) = %v, want %v", tc.caller, tc.a, err, tc.want)
			}
		})
	}
}

func TestCallerFrom(t *testing.T) {
	t.Run("the caller a transport put in the context is read back", func(t *testing.T) {
		if got := CallerFrom(auth.NewContext(t.Context(), alice)); got.UserID != alice.UserID || got.Method != alice.Method {
			t.Errorf("CallerFrom = %+v, want %+v", got, alice)
		}
	})
	t.Run("a context without a caller gives the anonymous caller", func(t *testing.T) {
		if got := CallerFrom(t.Context()); !got.Anonymous() {
			t.Errorf("CallerFrom = %+v, want the anonymous caller", got)
		}
	})
}
