package rest

import (
	"testing"

	"github.com/postsedge/caddy-posts/handlers/handlerstest"
	"github.com/postsedge/caddy-posts/handlers/request"
)

// FuzzDecodePost decodes hostile bodies into the input of a POST (newPost) and of a PATCH
// (changes): no panic, a refusal is a 4xx with {"error"}, and every string read is valid
// UTF-8 with no U+FFFD the body does not spell.
func FuzzDecodePost(f *testing.F) {
	for _, seed := range handlerstest.BodySeeds {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, body string) {
		members, err := request.Parse([]byte(body))
		if err != nil {
			handlerstest.CheckRefusal(t, err)
			return
		}
		in, err := newPost(members)
		if err != nil {
			handlerstest.CheckRefusal(t, err)
		} else {
			handlerstest.CheckText(t, []byte(body), "the title", in.Title)
			if in.Body != nil {
				handlerstest.CheckText(t, []byte(body), "the body", *in.Body)
			}
		}
		ch, err := changes(members)
		if err != nil {
			handlerstest.CheckRefusal(t, err)
			return
		}
		for name, c := range map[string]struct {
			set   bool
			value *string
		}{"title": {ch.Title.Set, ch.Title.Value}, "body": {ch.Body.Set, ch.Body.Value}} {
			if c.value != nil {
				if !c.set {
					t.Fatalf("%s has a value but is not set", name)
				}
				handlerstest.CheckText(t, []byte(body), name, *c.value)
			}
		}
	})
}
