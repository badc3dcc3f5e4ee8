package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/postsedge/caddy-posts/spans"
)

// DefaultAlgorithms are the signing algorithms accepted when none are configured.
var DefaultAlgorithms = []string{"RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA"}

// asymmetric are the algorithms a JWKS key can verify. "none" and the HMAC algorithms are not
// among them: a public key set must never verify a token signed with a shared secret.
var asymmetric = []string{"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}

// ValidAlgorithm checks that alg may be accepted for tokens verified against a JWKS.
func ValidAlgorithm(alg string) error {
	if !slices.Contains(asymmetric, alg) {
		return fmt.Errorf("%q is not an accepted signing algorithm (one of %s)", alg, strings.Join(asymmetric, " "))
	}
	return nil
}

// TokenConfig says which bearer tokens are accepted.
type TokenConfig struct {
	// Keys are the key sets that tokens are verified against; a key from any of them is accepted.
	Keys []*JWKS
	// Issuers, when not empty, are the accepted values of the iss claim.
	Issuers []string
	// Audiences, when not empty, are the accepted values of the aud claim: one must match.
	Audiences []string
	// Algorithms are the accepted signing algorithms; each must pass ValidAlgorithm. Empty means
	// DefaultAlgorithms.
	Algorithms []string
	// UserClaim holds the user id; NameClaim and EmailClaim the optional profile.
	UserClaim, NameClaim, EmailClaim string
	// Leeway is the clock skew allowed when checking exp, nbf and iat.
	Leeway time.Duration
	// Timeout bounds the wait for keys (a fetch for an unknown kid) on a request's behalf.
	Timeout time.Duration
	// CacheSize is the number of verified tokens remembered; 0 means DefaultCacheSize.
	CacheSize int
}

// DefaultCacheSize is the number of verified tokens remembered by default.
const DefaultCacheSize = 10_000

// Tokens verifies JWT bearer tokens against the configured key sets.
type Tokens struct {
	cfg    TokenConfig
	keys   keyRing
	parser *jwt.Parser
	cache  *tokenCache
	now    func() time.Time // the clock that exp, nbf, iat and the cache are checked against
}

// NewTokens returns a verifier for cfg.
func NewTokens(cfg TokenConfig) (*Tokens, error) {
	return newTokens(cfg, time.Now)
}

// newTokens is NewTokens with the clock that tokens are checked against.
func newTokens(cfg TokenConfig, now func() time.Time) (*Tokens, error) {
	switch {
	case len(cfg.Keys) == 0:
		return nil, errors.New("no JWKS is configured")
	case cfg.UserClaim == "":
		return nil, errors.New("no user claim is configured")
	case cfg.Timeout <= 0:
		return nil, errors.New("the timeout must be positive")
	}
	if len(cfg.Algorithms) == 0 {
		cfg.Algorithms = DefaultAlgorithms
	}
	for _, alg := range cfg.Algorithms {
		if err := ValidAlgorithm(alg); err != nil {
			return nil, err
		}
	}
	if cfg.CacheSize == 0 {
		cfg.CacheSize = DefaultCacheSize
	}
	options := []jwt.ParserOption{
		jwt.WithValidMethods(cfg.Algorithms),
		jwt.WithExpirationRequired(),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(cfg.Leeway),
		jwt.WithTimeFunc(now),
		jwt.WithJSONNumber(),
	}
	if len(cfg.Audiences) > 0 {
		options = append(options, jwt.WithAudience(cfg.Audiences...))
	}
	return &Tokens{cfg: cfg, keys: newKeyRing(cfg.Keys), parser: jwt.NewParser(options...), cache: newTokenCache(cfg.CacheSize), now: now}, nil
}

// Verify checks a bearer token and returns the caller it names. A bad token is an *Error with
// status 401; a token that cannot be checked yet is ErrKeysUnavailable.
func (t *Tokens) Verify(ctx context.Context, token string) (Identity, error) {
	t.keys.tracedBy(ctx)
	digest := sha256.Sum256([]byte(token))
	version := t.keys.version()
	if id, ok := t.cache.get(digest, version, t.now()); ok {
		return id, nil
	}
	// A token checked in full, not found in the cache: an event of the request's span.
	spans.Current(ctx).Event("auth.jwt.verified")
	ctx, cancel := context.WithTimeout(ctx, t.cfg.Timeout)
	defer cancel()
	t.keys.awaitFirstAttempts(ctx)
	claims := jwt.MapClaims{}
	parsed, err := t.parser.ParseWithClaims(token, claims, t.keys.keyfunc(ctx))
	if err != nil {
		return Identity{}, t.refusal(parsed, claims, err)
	}
	if len(t.cfg.Issuers) > 0 {
		if iss, _ := claims.GetIssuer(); !slices.Contains(t.cfg.Issuers, iss) {
			return Identity{}, invalidToken(ReasonWrongIssuer, "the token's issuer (iss) is not accepted")
		}
	}
	id, err := t.identity(claims)
	if err != nil {
		return Identity{}, err
	}
	if exp, _ := claims.GetExpirationTime(); exp != nil {
		id.Expires = exp.Time.Add(t.cfg.Leeway) // as long as Verify accepts the token
		t.cache.put(digest, id, version, exp.Time, t.now())
	}
	return id, nil
}

// identity reads the caller from verified claims.
func (t *Tokens) identity(claims jwt.MapClaims) (Identity, error) {
	userID, ok := claims[t.cfg.UserClaim].(string)
	if !ok || userID == "" {
		return Identity{}, invalidToken(ReasonBadUserID, fmt.Sprintf("the token has no %s claim with the user id", t.cfg.UserClaim))
	}
	if err := ValidUserID(userID); err != nil {
		return Identity{}, invalidToken(ReasonBadUserID, fmt.Sprintf("the token's %s claim is not an accepted user id: %s", t.cfg.UserClaim, err))
	}
	id := Identity{UserID: userID, Method: MethodJWT, Claims: claims}
	id.Name, _ = claims[t.cfg.NameClaim].(string)
	id.Email, _ = claims[t.cfg.EmailClaim].(string)
	return id, nil
}

// refusal turns a parse error into the error the client gets. The descriptions are fixed
// sentences: nothing from the token is echoed back.
func (t *Tokens) refusal(parsed *jwt.Token, claims jwt.MapClaims, err error) error {
	_, hasExp := claims["exp"]
	switch {
	case errors.Is(err, ErrKeysUnavailable):
		return ErrKeysUnavailable
	case errors.Is(err, jwt.ErrTokenMalformed):
		return invalidToken(ReasonMalformed, "the token is not a well-formed JWT")
	case parsed != nil && parsed.Method != nil && !slices.Contains(t.cfg.Algorithms, parsed.Method.Alg()):
		return invalidToken(ReasonNotAccepted, "the token's signing algorithm is not accepted")
	case errors.Is(err, errCritical):
		return invalidToken(ReasonNotAccepted, "the token's header lists critical extensions (crit), which this server does not understand")
	case errors.Is(err, errKIDNotString):
		return invalidToken(ReasonMalformed, "the token's key id (kid) is not a string")
	case errors.Is(err, errUnknownKID):
		return invalidToken(ReasonUnknownKID, "the token's key id (kid) is not in the identity provider's key set")
	case errors.Is(err, errKeyNotForSig):
		return invalidToken(ReasonNotAccepted, "the token's key is not published for verifying signatures (use, key_ops)")
	case errors.Is(err, errKeyNotForAlg), errors.Is(err, jwt.ErrInvalidKeyType):
		return invalidToken(ReasonNotAccepted, "the token's signing algorithm does not match its key")
	case errors.Is(err, errNoKeyForToken):
		return invalidToken(ReasonNotAccepted, "no key of the identity provider's key set can verify the token's signing algorithm")
	case parsed != nil && parsed.Header["kid"] == nil && errors.Is(err, jwt.ErrTokenSignatureInvalid) && !t.keys.fetched():
		return ErrKeysUnavailable // a token without kid may be signed by a key of a set not fetched yet
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return invalidToken(ReasonBadSignature, "the token's signature is invalid")
	case !hasExp:
		return invalidToken(ReasonNotAccepted, "the token has no expiry (exp)")
	case errors.Is(err, jwt.ErrTokenExpired):
		return invalidToken(ReasonExpired, "the token has expired")
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return invalidToken(ReasonNotYetValid, "the token is not valid yet (nbf)")
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return invalidToken(ReasonNotYetValid, "the token's issue time (iat) is in the future")
	case errors.Is(err, jwt.ErrTokenInvalidAudience), errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return invalidToken(ReasonWrongAudience, "the token is not meant for this audience (aud)")
	case errors.Is(err, jwt.ErrInvalidType):
		return invalidToken(ReasonMalformed, "the token has a claim of the wrong type")
	}
	return invalidToken(ReasonNotAccepted, "the token cannot be verified")
}
