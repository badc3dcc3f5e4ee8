package caddymodule

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/postsedge/caddy-posts/auth"
	"github.com/postsedge/caddy-posts/errcode"
	"github.com/postsedge/caddy-posts/handlers/live"
)

// hubs holds the WebSocket hubs: a site's open connections, shared by the configs that keep the
// site on the same store and let the same clients in the same way, so that a reload hands the
// connections to the new config, subscriptions running, rather than closing them.
var hubs = caddy.NewUsagePool()

// reloadCloseSpread is how long the connections of a hub that no config keeps any more take to
// close: each at its own moment within it, so that their clients do not all reconnect at once.
// (A variable for the tests, which wait it out.)
var reloadCloseSpread = 5 * time.Second

// pooledHub makes a hub a pool value.
type pooledHub struct{ *live.Hub }

// Destruct closes the hub's connections when the last config that used it is cleaned up: on a
// reload (the site removed, or its clients let in another way), with 1012 spread over
// reloadCloseSpread; when the process exits, at once with 1001, waiting a moment for the close
// frames to go out.
func (p pooledHub) Destruct() error {
	if caddy.Exiting() {
		p.Close(errcode.New(errcode.GoingAway, "the server is shutting down"), 0)
		p.Wait(time.Second)
		return nil
	}
	p.Close(errcode.New(errcode.ServiceRestart, "the site was removed or lets clients in another way: reconnect"), reloadCloseSpread)
	return nil
}

// loadHub returns the pooled hub of this site's WebSocket connections. Its key is the store, how
// clients are let in (authFingerprint), and the handler's place among those of this config
// with the same two, so that two sites alike each keep their own hub.
func (h *Handler) loadHub(ctx caddy.Context, authn *auth.Authenticator, repl *caddy.Replacer) (*live.Hub, error) {
	app, err := ctx.App(AppName)
	if err != nil {
		return nil, err
	}
	alike := "websockets of " + h.storeKey + " for clients " + h.authFingerprint(authn, repl)
	key := fmt.Sprintf("%s, site %d", alike, app.(*App).nextSite(alike))
	val, _, err := hubs.LoadOrNew(key, func() (caddy.Destructor, error) { return pooledHub{live.NewHub()}, nil })
	if err != nil {
		return nil, err
	}
	h.hubKey, h.hub = key, val.(pooledHub).Hub
	return h.hub, nil
}

// nextSite counts the handlers of this config whose hubs would have the key alike: 0 for the first.
func (a *App) nextSite(alike string) int {
	if a.sites == nil {
		a.sites = map[string]int{}
	}
	n := a.sites[alike]
	a.sites[alike]++
	return n
}

// authFingerprint is a digest of what decides who may connect and as whom: the API keys, the
// token checks, trust_caddy_auth, subscriptions_require_auth and allowed_origins, expanded. A
// connection was let in, and its caller identified, by the config of its upgrade and
// connection_init; a reload that changes any of these closes it (1012), so that its client
// connects again under the new rules, rather than keep a connection they might refuse.
// allowed_origins is among them because browsers are held to it only at the upgrade: a page of
// an origin the new config no longer allows would otherwise stay connected.
func (h *Handler) authFingerprint(authn *auth.Authenticator, repl *caddy.Replacer) string {
	b, _ := json.Marshal(struct {
		Keys                                     []auth.APIKey
		Header                                   string
		TrustCaddyAuth, SubscriptionsRequireAuth bool
		JWKS, Issuers, Audiences, Algorithms     []string
		UserClaim, NameClaim, EmailClaim, Leeway string
		Origins                                  []string
	}{
		authn.APIKeys, authn.APIKeyHeader, h.TrustCaddyAuth, h.SubscriptionsRequireAuth,
		replaceAll(repl, h.JWKSURLs), replaceAll(repl, h.Issuers), replaceAll(repl, h.Audiences), h.Algorithms,
		h.UserClaim, h.NameClaim, h.EmailClaim, time.Duration(*h.Leeway).String(), h.AllowedOrigins,
	})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8]) // the keys' digests are in it: it is never shown whole
}
