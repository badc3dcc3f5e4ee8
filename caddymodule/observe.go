package caddymodule

import (
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/metrics"
	"github.com/postsedge/caddy-posts/store"
)

// observeStore counts the operations of st, a store of backend (sqlite, mongodb), in the metrics.
func observeStore(st store.Store, backend string) store.Store {
	return store.Observe(st, backend, storeObserver(backend))
}

// storeObserver records each operation of a store of backend in the metrics.
func storeObserver(backend string) store.Observer {
	return func(operation string, took time.Duration, err error) {
		metrics.StoreOperation(backend, operation, store.ErrorKind(err), took)
	}
}

// accessLogField adds field to Caddy's access log line of r.
func accessLogField(r *http.Request, field zap.Field) {
	if extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
		extra.Set(field)
	}
}
