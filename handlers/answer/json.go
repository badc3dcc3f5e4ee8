package answer

import (
	"encoding/json"
	"net/http"
	"sync"
	"unicode/utf8"
)

// buffers are the buffers answers are encoded in before their one Write, which copies them
// (an io.Writer keeps no slice it is given).
var buffers = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledBuffer is the largest buffer kept for another answer: a page near MaxResponseSize
// is rare, and not worth holding a megabyte for.
const maxPooledBuffer = 64 << 10

// GetBuffer is an empty buffer to encode an answer in; PutBuffer takes it back once written.
func GetBuffer() *[]byte { return buffers.Get().(*[]byte) }

// PutBuffer keeps b for another answer, unless it has grown past maxPooledBuffer.
func PutBuffer(b *[]byte) {
	if cap(*b) <= maxPooledBuffer {
		*b = (*b)[:0]
		buffers.Put(b)
	}
}

// WriteJSON writes v as the JSON answer with status, HTML unescaped.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	SetJSONHeaders(w)
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // the status is sent; a client that went away is no one's fault
}

// SetJSONHeaders sets the headers of every JSON response.
func SetJSONHeaders(w http.ResponseWriter) {
	if ExchangeOf(w) == nil {
		// Both values in one array rather than one slice each; each is capped (fixedHeaders).
		values := []string{"application/json", "nosniff"}
		h := w.Header()
		h["Content-Type"], h["X-Content-Type-Options"] = values[:1:1], values[1:]
		return
	}
	SetFixed(w, FixedContentType, "application/json")
	SetFixed(w, FixedNoSniff, "nosniff")
}

// MustJSON is v as JSON; every value given encodes, and one that does not is a fault of ours,
// answered as an internal server error's message.
func MustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil { // every value here encodes; a fault of ours if not
		b, _ = json.Marshal(map[string]string{"message": "internal server error"})
	}
	return b
}

// Truncate shortens s, a name a client sent, for a close reason (which may not exceed 123
// bytes) or a log line, at a character boundary.
func Truncate(s string) string {
	if len(s) <= 64 {
		return s
	}
	cut := 64
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
