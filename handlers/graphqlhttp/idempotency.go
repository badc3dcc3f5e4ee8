// A GraphQL mutation of one createPost under an Idempotency-Key, answered once: its retries get
// the kept answer (answer.WriteKept), as POST /posts's do (handlers/rest/idempotency.go).

package graphqlhttp

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/request"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

// serveGraphQLOnce runs op, a mutation sent with an Idempotency-Key, for caller, whose context
// ctx carries, and writes its answer in media: the kept one to a retry.
func (h *Handler) serveGraphQLOnce(ctx context.Context, w http.ResponseWriter, r *http.Request, media string, caller posts.Caller, op *schema.Operation) {
	key, _, err := request.IdempotencyKey(r)
	if err == nil && !op.CreatesOnePost() {
		err = request.RefuseIdempotencyKey(r, "a mutation other than one createPost field (not beside other fields, nor in a fragment)")
	}
	if err != nil {
		h.Answer.FailGraphQL(w, r, media, err)
		return
	}
	var code string // of the response run writes, for the metrics
	kept, replayed, err := h.Posts.RunOnce(ctx, caller, posts.Keyed{Key: key, Fingerprint: op.Fingerprint()},
		func(ctx context.Context) (posts.Answer, error) {
			rec := answer.NewRecorder()
			x := &answer.Exchange{ResponseWriter: rec}
			h.executeGraphQL(ctx, x, media, op)
			code = x.Code
			return rec.Kept(), nil
		})
	if err != nil {
		answer.RetryAfterKey(w, err)
		h.Answer.FailGraphQL(w, r, media, err)
		return
	}
	if code == "" { // a kept answer: its code is read from it
		code = graphQLCode(kept.Body)
	}
	if x := answer.ExchangeOf(w); x != nil {
		x.Code = code
	}
	answer.WriteKept(w, kept, replayed)
}

// graphQLCode is the code of a GraphQL response in the metrics, as answer.ResponseCode finds it, read
// from its JSON.
func graphQLCode(body []byte) string {
	var res struct {
		Errors []struct {
			Extensions struct {
				Code string `json:"code"`
			} `json:"extensions"`
		} `json:"errors"`
	}
	switch {
	case json.Unmarshal(body, &res) != nil:
		return "ERROR"
	case len(res.Errors) == 0:
		return "OK"
	case res.Errors[0].Extensions.Code == "":
		return "ERROR"
	}
	return res.Errors[0].Extensions.Code
}
