// The creates an Idempotency-Key makes safe to retry: POST /posts, and a GraphQL mutation of one
// createPost. The key is read by request.IdempotencyKey, the answers kept and sent again by
// answer.Recorder and answer.WriteKept; posts.Service.CreateOnce and RunOnce keep the rule.

package handlers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/handlers/request"
	"github.com/postsedge/caddy-posts/posts"
	"github.com/postsedge/caddy-posts/schema"
)

// createOnce serves POST /posts with an Idempotency-Key: in is the post asked for, read and
// checked like any POST's.
func (a *API) createOnce(w http.ResponseWriter, r *http.Request, caller posts.Caller, in posts.NewPost, key string) error {
	k := posts.Keyed{Key: key, Fingerprint: restFingerprint(r, in)}
	kept, replayed, err := a.cfg.Posts.CreateOnce(r.Context(), caller, in, k, func(p posts.Post) posts.Answer {
		rec := answer.NewRecorder()
		writeCreated(rec, p)
		return rec.Kept()
	})
	if err != nil {
		answer.RetryAfterKey(w, err)
		return err
	}
	answer.WriteKept(w, kept, replayed)
	return nil
}

// restFingerprint is what a POST asks for: its method and path, and the post as read, so that
// white space, the order of the members and escapes in the JSON do not count.
func restFingerprint(r *http.Request, in posts.NewPost) string {
	post, _ := json.Marshal(struct {
		Title string  `json:"title"`
		Body  *string `json:"body"`
	}{in.Title, in.Body})
	sum := sha256.Sum256(append([]byte(r.Method+" "+r.URL.Path+"\n"), post...))
	return hex.EncodeToString(sum[:])
}

// serveGraphQLOnce runs op, a mutation sent with an Idempotency-Key, for caller, whose context
// ctx carries, and writes its answer in media: the kept one to a retry.
func (a *API) serveGraphQLOnce(ctx context.Context, w http.ResponseWriter, r *http.Request, media string, caller posts.Caller, op *schema.Operation) {
	key, _, err := request.IdempotencyKey(r)
	if err == nil && !op.CreatesOnePost() {
		err = request.RefuseIdempotencyKey(r, "a mutation other than one createPost field (not beside other fields, nor in a fragment)")
	}
	if err != nil {
		a.answer.FailGraphQL(w, r, media, err)
		return
	}
	var code string // of the response run writes, for the metrics
	kept, replayed, err := a.cfg.Posts.RunOnce(ctx, caller, posts.Keyed{Key: key, Fingerprint: op.Fingerprint()},
		func(ctx context.Context) (posts.Answer, error) {
			rec := answer.NewRecorder()
			x := &answer.Exchange{ResponseWriter: rec}
			a.executeGraphQL(ctx, x, media, op)
			code = x.Code
			return rec.Kept(), nil
		})
	if err != nil {
		answer.RetryAfterKey(w, err)
		a.answer.FailGraphQL(w, r, media, err)
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
