// POST /posts with an Idempotency-Key, which makes it safe to retry (as it does a GraphQL mutation
// of one createPost, handlers/graphqlhttp). The key is read by request.IdempotencyKey, the answers
// kept and sent again by answer.Recorder and answer.WriteKept; posts.Service.CreateOnce keeps the
// rule.

package rest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"

	"github.com/postsedge/caddy-posts/handlers/answer"
	"github.com/postsedge/caddy-posts/posts"
)

// createOnce serves POST /posts with an Idempotency-Key: in is the post asked for, read and
// checked like any POST's.
func (h *Handler) createOnce(w http.ResponseWriter, r *http.Request, caller posts.Caller, in posts.NewPost, key string) error {
	k := posts.Keyed{Key: key, Fingerprint: Fingerprint(r, in)}
	kept, replayed, err := h.Posts.CreateOnce(r.Context(), caller, in, k, func(p posts.Post) posts.Answer {
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

// Fingerprint is what a POST of in to r's path asks for: its method and path, and the post as read, so that
// white space, the order of the members and escapes in the JSON do not count.
func Fingerprint(r *http.Request, in posts.NewPost) string {
	post, _ := json.Marshal(struct {
		Title string  `json:"title"`
		Body  *string `json:"body"`
	}{in.Title, in.Body})
	sum := sha256.Sum256(append([]byte(r.Method+" "+r.URL.Path+"\n"), post...))
	return hex.EncodeToString(sum[:])
}
