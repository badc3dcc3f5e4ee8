package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/postsedge/caddy-posts/auth"
)

// placeholder is the value of one of Caddy's placeholders for r, or "".
func placeholder(r *http.Request, name string) string {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return ""
	}
	value, _ := repl.GetString(name)
	return value
}

// clientIP is the client's address as Caddy found it: the peer's, or with trusted_proxies the
// one the proxies name.
func clientIP(r *http.Request) string {
	ip, _ := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string)
	return ip // "" outside Caddy's server: the API then counts by the peer's address
}

// requestID is Caddy's id of the request, as in its access log.
func requestID(r *http.Request) string { return placeholder(r, "http.request.uuid") }

// userPlaceholder prefixes the placeholders of the caller, as Caddy's authentication handler names them.
const userPlaceholder = "http.auth.user."

// caddyUser is the user an earlier Caddy authentication handler left in {http.auth.user.id}.
func caddyUser(r *http.Request) string { return placeholder(r, userPlaceholder+"id") }

// setUserPlaceholders puts the caller into {http.auth.user.id} (which the access log records as
// user_id), its token's claims into {http.auth.user.<claim>}, and an API key's profile into
// {http.auth.user.name} and {http.auth.user.email}.
func setUserPlaceholders(r *http.Request, caller auth.Identity) {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return
	}
	for claim, value := range caller.Claims {
		repl.Set(userPlaceholder+claim, value)
	}
	if caller.Claims == nil {
		if caller.Name != "" {
			repl.Set(userPlaceholder+"name", caller.Name)
		}
		if caller.Email != "" {
			repl.Set(userPlaceholder+"email", caller.Email)
		}
	}
	repl.Set(userPlaceholder+"id", caller.UserID)
}
