// Package caddyposts registers the http.handlers.posts Caddy module and its posts Caddyfile
// directive. Build it into Caddy with:
//
//	xcaddy build --with github.com/postsedge/caddy-posts
package caddyposts

import _ "github.com/postsedge/caddy-posts/caddymodule"
