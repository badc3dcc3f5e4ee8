package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// APIKey is a configured API key: the SHA-256 digest of the key, and the user it stands for.
type APIKey struct {
	Digest [sha256.Size]byte
	UserID string
	// Name and Email are the user's optional profile.
	Name, Email string
}

// digestPrefix marks a key given as the hex SHA-256 digest of the real key.
const digestPrefix = "sha256:"

// ParseAPIKey reads a configured key, either in clear or as "sha256:<64 hex digits>" of the key.
// The user id must pass ValidUserID.
func ParseAPIKey(key, userID string) (APIKey, error) {
	if err := ValidUserID(userID); err != nil {
		return APIKey{}, err
	}
	if hexDigest, ok := strings.CutPrefix(key, digestPrefix); ok {
		var k APIKey
		b, err := hex.DecodeString(hexDigest)
		if err != nil || len(b) != sha256.Size {
			return APIKey{}, fmt.Errorf("%q must be followed by %d hex digits", digestPrefix, 2*sha256.Size)
		}
		copy(k.Digest[:], b)
		k.UserID = userID
		return k, nil
	}
	if key == "" {
		return APIKey{}, errors.New("the key is empty (is its environment variable set?)")
	}
	return APIKey{Digest: sha256.Sum256([]byte(key)), UserID: userID}, nil
}

// apiKeyHeader returns the caller named by the API key header, or anonymous when there is none.
func (a *Authenticator) apiKeyHeader(header http.Header) (Identity, error) {
	values := header.Values(a.APIKeyHeader)
	switch {
	case len(values) == 0:
		return Identity{}, nil
	case len(values) > 1:
		return Identity{}, invalidRequest(fmt.Sprintf("the %s header is given more than once", a.APIKeyHeader))
	case values[0] == "":
		return Identity{}, invalidRequest(fmt.Sprintf("the %s header is empty", a.APIKeyHeader))
	}
	return a.apiKey(values[0])
}

// apiKey returns the caller named by a key the client sent.
func (a *Authenticator) apiKey(key string) (Identity, error) {
	k, ok := a.lookup(key)
	if !ok {
		return Identity{}, invalidToken(ReasonUnknownKey, "unknown API key")
	}
	return Identity{UserID: k.UserID, Method: MethodAPIKey, Name: k.Name, Email: k.Email}, nil
}

// lookup compares the key's digest with every configured digest in constant time, so the time
// taken tells nothing about which key, if any, came close.
func (a *Authenticator) lookup(key string) (found APIKey, ok bool) {
	digest := sha256.Sum256([]byte(key))
	for i := range a.APIKeys {
		k := &a.APIKeys[i] // not a copy of each key, twice, as ranging over the values made
		if subtle.ConstantTimeCompare(digest[:], k.Digest[:]) == 1 && !ok {
			found, ok = *k, true
		}
	}
	return found, ok
}
