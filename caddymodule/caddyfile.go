package caddymodule

import (
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/postsedge/caddy-posts/auth"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("posts", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("posts", httpcaddyfile.Before, "respond")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	handler := new(Handler)
	err := handler.UnmarshalCaddyfile(h.Dispenser)
	return handler, err
}

// subdirectiveArgs is the number of arguments of each subdirective.
var subdirectiveArgs = map[string]int{
	"mongodb_uri": 1, "database": 1, "data_dir": 1, "api_key": 2, "api_key_header": 1,
	"max_body_size": 1, "max_limit": 1, "timeout": 1,
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	posts [<matcher>] {
//	    mongodb_uri    <uri>
//	    database       <name>
//	    data_dir       <path>
//	    api_key        <key>|sha256:<hex> <user-id>
//	    api_key_header <name>
//	    max_body_size  <size>
//	    max_limit      <n>
//	    timeout        <duration>
//	}
//
// Every subdirective is optional; api_key may be repeated, the others may not.
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive's name
	if d.NextArg() {
		return d.Errf("posts takes no arguments, only a block of subdirectives; got %q", d.Val())
	}
	seen := map[string]bool{}
	for d.NextBlock(0) {
		name := d.Val()
		want, known := subdirectiveArgs[name]
		switch {
		case !known:
			return d.Errf("unrecognized subdirective %q", name)
		case seen[name] && name != "api_key":
			return d.Errf("%s is given more than once", name)
		}
		seen[name] = true
		args := d.RemainingArgs()
		if len(args) != want {
			return d.Errf("%s takes %d argument(s), got %d", name, want, len(args))
		}
		arg := args[0]
		switch name {
		case "mongodb_uri":
			h.MongoDBURI = arg
		case "database":
			if err := validDatabase(arg); err != nil {
				return d.Errf("database: %v", err)
			}
			h.Database = arg
		case "data_dir":
			h.DataDir = arg
		case "api_key":
			if _, err := auth.ParseAPIKey(arg, args[1]); err != nil && !strings.Contains(arg+args[1], "{") {
				return d.Errf("api_key: %v", err) // a placeholder is checked once Provision expands it
			}
			h.APIKeys = append(h.APIKeys, APIKey{Key: arg, UserID: args[1]})
		case "api_key_header":
			h.APIKeyHeader = arg
		case "max_body_size":
			size, err := humanize.ParseBytes(arg)
			if err != nil || size < 1 || size > 1<<40 {
				return d.Errf("max_body_size: %q is not a size such as 1MiB or 512KB", arg)
			}
			h.MaxBodySize = int64(size)
		case "max_limit":
			n, err := strconv.Atoi(arg)
			if err != nil || n < 1 {
				return d.Errf("max_limit: %q is not a whole number of at least 1", arg)
			}
			h.MaxLimit = n
		case "timeout":
			t, err := caddy.ParseDuration(arg)
			if err != nil || t <= 0 {
				return d.Errf("timeout: %q is not a positive duration such as 5s", arg)
			}
			h.Timeout = caddy.Duration(t)
		}
	}
	return nil
}

// Interface guard
var _ caddyfile.Unmarshaler = (*Handler)(nil)
