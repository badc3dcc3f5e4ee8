// Tests of the identity a context carries, and the request the other tests authenticate.

package auth_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"github.com/postsedge/caddy-posts/auth"
)

func newRequest(header http.Header) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/posts", nil)
	for name, values := range header {
		for _, v := range values {
			r.Header.Add(name, v)
		}
	}
	return r
}

func TestContext(t *testing.T) {
	tests := []struct {
		name string
		ctx  context.Context
		want auth.Identity
	}{
		{
			name: "a bare context carries the anonymous identity",
			ctx:  context.Background(),
			want: auth.Identity{},
		},
		{
			name: "an identity put in a context comes back out",
			ctx:  auth.NewContext(context.Background(), auth.Identity{UserID: "alice", Method: "api_key"}),
			want: auth.Identity{UserID: "alice", Method: "api_key"},
		},
		{
			name: "the innermost identity wins",
			ctx: auth.NewContext(
				auth.NewContext(context.Background(), auth.Identity{UserID: "alice", Method: "api_key"}),
				auth.Identity{UserID: "bob", Method: "api_key"}),
			want: auth.Identity{UserID: "bob", Method: "api_key"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := auth.FromContext(tc.ctx)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("FromContext = %+v, want %+v", got, tc.want)
			}
			if got.Anonymous() != (tc.want.UserID == "") {
				t.Errorf("Anonymous() = %v for %+v", got.Anonymous(), got)
			}
		})
	}
}
