// The answers kept under an idempotency key (posts.Answer): recorded as they are written, and
// written again to a retry.

package answer

import (
	"bytes"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/postsedge/caddy-posts/posts"
)

// RetryAfterKey sets the Retry-After of a key held by a request under way: the seconds until
// its hold ends at the latest, rounded up.
func RetryAfterKey(w http.ResponseWriter, err error) {
	if inUse, ok := errors.AsType[*posts.KeyInUseError](err); ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(max(inUse.RetryAfter, time.Second).Seconds()))))
	}
}

// WriteKept writes a, an answer kept under an idempotency key, with the header that says it is
// sent again if replayed.
func WriteKept(w http.ResponseWriter, a posts.Answer, replayed bool) {
	h := w.Header()
	for name, values := range a.Header {
		h[name] = values
	}
	if replayed {
		h.Set(ReplayedHeader, "true")
	}
	w.WriteHeader(a.Status)
	_, _ = w.Write(a.Body) // the status is sent; a client that went away is no one's fault
}

// Recorder is a response writer that keeps what is written, to make a posts.Answer of it (Kept).
type Recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{header: http.Header{}} }

func (rec *Recorder) Header() http.Header { return rec.header }

func (rec *Recorder) WriteHeader(status int) {
	if rec.status == 0 {
		rec.status = status
	}
}

func (rec *Recorder) Write(b []byte) (int, error) {
	rec.WriteHeader(http.StatusOK)
	return rec.body.Write(b)
}

// Kept is what was written, as the answer to keep.
func (rec *Recorder) Kept() posts.Answer {
	return posts.Answer{Status: rec.status, Header: rec.header, Body: rec.body.Bytes()}
}
