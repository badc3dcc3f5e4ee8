// Package caddymodule is the Caddy glue of caddy-posts: the http.handlers.posts module, its
// config, its Caddyfile directive, and the resources it shares across config reloads; the app
// that opens the embedded stores when a config starts (App), and the commands posts-backup,
// posts-import-ferretdb and posts-copy. The API itself lives in package handlers.
package caddymodule

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(Handler{})
}

// CaddyModule returns the Caddy module information.
func (Handler) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.posts",
		New: func() caddy.Module { return new(Handler) },
	}
}

// Validate checks the config after Provision, with the rule of each field in configFields, in
// their order: the same config gives the same errors in the same order.
func (h *Handler) Validate() error {
	var errs []error
	for _, f := range configFields {
		if f.check != nil {
			errs = append(errs, f.check(h))
		}
	}
	return errors.Join(errs...)
}

// Cleanup lets go of this config's share of each pool it loaded from, a user before what it
// uses: its site's hub of WebSockets and HTTP streams (hubs), its follower (followers), broker
// (brokers), key sets (jwksPool), sweep of keys (keySweeps) and store (stores). A pool's value
// is Destructed when the last config that holds it lets go.
func (h *Handler) Cleanup() error {
	var errs []error
	if h.hubKey != "" { // the connections go on under the config before or after this one, or close
		if h.api != nil {
			h.hub.Unregister(h.api.LiveConfig())
		}
		_, err := hubs.Delete(h.hubKey)
		errs = append(errs, err)
	}
	if h.followerKey != "" { // before the broker it hands over to
		_, err := followers.Delete(h.followerKey)
		errs = append(errs, err)
	}
	if h.eventsKey != "" {
		_, err := brokers.Delete(h.eventsKey)
		errs = append(errs, err)
	}
	for _, key := range h.jwksKeys {
		_, err := jwksPool.Delete(key)
		errs = append(errs, err)
	}
	if h.sweepKey != "" { // before the store it sweeps
		_, err := keySweeps.Delete(h.sweepKey)
		errs = append(errs, err)
	}
	if h.storeKey != "" {
		_, err := stores.Delete(h.storeKey)
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ServeHTTP serves the API's paths and passes every other request to next.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	route := h.api.Route(r)
	if route == nil {
		return next.ServeHTTP(w, r)
	}
	route.ServeHTTP(w, r)
	return nil
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Handler)(nil)
	_ caddy.Validator             = (*Handler)(nil)
	_ caddy.CleanerUpper          = (*Handler)(nil)
	_ caddyhttp.MiddlewareHandler = (*Handler)(nil)
)
