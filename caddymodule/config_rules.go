// The rules of the config fields that configFields (config.go) names.

package caddymodule

import (
	"fmt"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/dustin/go-humanize"

	"github.com/postsedge/caddy-posts/auth"
)

// atLeastOne is the rule of a count.
func atLeastOne(name string, n int) error {
	if n < 1 {
		return fmt.Errorf("%s must be at least 1, not %d", name, n)
	}
	return nil
}

// countUpTo is the rule of a count with a most.
func countUpTo(name string, n, most int) error {
	if n < 1 || n > most {
		return fmt.Errorf("%s must be from 1 to %d, not %d", name, most, n)
	}
	return nil
}

// sizeUpTo is the rule of a size in bytes: from 1 to most.
func sizeUpTo(name string, n, most int64) error {
	if n < 1 || n > most {
		return fmt.Errorf("%s must be from 1 byte to %s, not %d", name, humanize.IBytes(uint64(most)), n)
	}
	return nil
}

// positive is the rule of a duration that must pass.
func positive(name string, d caddy.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%s must be positive, not %s", name, time.Duration(d))
	}
	return nil
}

// durationIn is the rule of a duration with a least and a most.
func durationIn(name string, d caddy.Duration, least, most time.Duration) error {
	if time.Duration(d) < least || time.Duration(d) > most {
		return fmt.Errorf("%s must be from %s to %s, not %s", name, least, most, time.Duration(d))
	}
	return nil
}

// validDatabase checks a name against MongoDB's rules for database names.
func validDatabase(name string) error {
	if name == "" || len(name) > 63 || strings.ContainsAny(name, "/\\. \"$\x00") {
		return fmt.Errorf(`database: %q is not a MongoDB database name (1 to 63 characters, none of /\. "$)`, name)
	}
	return nil
}

func checkSynchronous(h *Handler) error {
	if h.Synchronous != SyncNormal && h.Synchronous != SyncFull {
		return fmt.Errorf("synchronous must be %s or %s, not %q", SyncNormal, SyncFull, h.Synchronous)
	}
	return nil
}

func checkAlgorithms(h *Handler) error {
	for _, alg := range h.Algorithms {
		if err := auth.ValidAlgorithm(alg); err != nil {
			return fmt.Errorf("algorithms: %w", err)
		}
	}
	return nil
}

func checkLeeway(h *Handler) error {
	if h.Leeway != nil && (*h.Leeway < 0 || *h.Leeway > MaxLeeway) {
		return fmt.Errorf("leeway must be from 0s to %s, not %s", time.Duration(MaxLeeway), time.Duration(*h.Leeway))
	}
	return nil
}

func checkJWKSRefresh(h *Handler) error {
	if h.JWKSRefresh < MinJWKSRefresh {
		return fmt.Errorf("jwks_refresh must be at least %s, not %s", time.Duration(MinJWKSRefresh), time.Duration(h.JWKSRefresh))
	}
	return nil
}

// servedPath is the rule of a path the handler serves beside the API (health_path,
// openapi_path): a path, and not one the API serves already. example is one that would do.
func servedPath(name, p, example string) error {
	switch {
	case p == "":
		return nil
	case !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?# \t"):
		return fmt.Errorf("%s must be a path such as %s, not %q", name, example, p)
	case p == "/posts" || strings.HasPrefix(p, "/posts/") || p == "/graphql" || strings.HasPrefix(p, "/graphql/"):
		return fmt.Errorf("%s %q is a path of the API; choose another, such as %s", name, p, example)
	}
	return nil
}
