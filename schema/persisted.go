// Persisted queries: a request may name its document by the SHA-256 of its text instead of
// sending the text. With Apollo's automatic persisted queries (APQ) the client sends the hash
// alone first, and the text with the hash when the server answers PERSISTED_QUERY_NOT_FOUND; the
// document is then in the cache (documents.go) for the next request. The operations of a
// persisted query manifest (Apollo's format) are held from the start, and with
// Limits.PersistedOnly they are the only operations that run.

package schema

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	gqlerrors "github.com/graph-gophers/graphql-go/errors"

	"github.com/postsedge/caddy-posts/errcode"
)

// PersistedQuery is one operation of a persisted query manifest.
type PersistedQuery struct {
	// ID is the SHA-256 of Body, in lowercase hex: the hash a client sends.
	ID string `json:"id"`
	// Body is the document: the operation and the fragments it spreads.
	Body string `json:"body"`
	// Name and Type are the operation's name and type, for messages.
	Name string `json:"name"`
	Type string `json:"type"`
}

// ManifestFormat is the format of the manifests ParseManifest reads: what Apollo's
// generate-persisted-query-manifest writes, version 1.
const ManifestFormat = "apollo-persisted-query-manifest"

// ParseManifest reads a persisted query manifest and checks that the id of each operation is the
// SHA-256 of its body, the hash its clients send. New checks the bodies against the limits.
func ParseManifest(data []byte) ([]PersistedQuery, error) {
	var m struct {
		Format     string           `json:"format"`
		Version    int              `json:"version"`
		Operations []PersistedQuery `json:"operations"`
	}
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("not a persisted query manifest: %v", err)
	}
	if m.Format != ManifestFormat || m.Version != 1 {
		return nil, fmt.Errorf("the format is %q version %d; want %q version 1", m.Format, m.Version, ManifestFormat)
	}
	for i, op := range m.Operations {
		switch {
		case op.Body == "":
			return nil, fmt.Errorf("operation %d (%q) has no body", i+1, op.Name)
		case op.ID != hashOf(op.Body):
			return nil, fmt.Errorf("operation %d (%q): its id %q is not the SHA-256 of its body, %s", i+1, op.Name, op.ID, hashOf(op.Body))
		}
	}
	return m.Operations, nil
}

// persist prepares the documents of a manifest's operations and holds them for good; a document
// refused by a check that needs no request (see prepareDocument) is an error.
func (s *Schema) persist(manifest []PersistedQuery) error {
	for i, pq := range manifest {
		d := &document{hash: hashOf(pq.Body), query: pq.Body} // its ID, if ParseManifest read it
		if refusal := s.prepareDocument(d); refusal != nil {
			return fmt.Errorf("persisted operation %d (%q, id %s) is refused: %s", i+1, pq.Name, pq.ID, refusal.Message)
		}
		s.documents.persisted[d.hash] = d
	}
	return nil
}

// prepareDocument makes the checks of Prepare that need no request on d: its text, its parse,
// the admission pass, the limits on each of its operations, and the cost of those whose cost
// reads no variable.
func (s *Schema) prepareDocument(d *document) *gqlerrors.QueryError {
	if n := s.limits.MaxQueryLength; len(d.query) > n {
		return tooLong(len(d.query), n)
	}
	if refusal := s.parse(d); refusal != nil {
		return refusal
	}
	var refusal *gqlerrors.QueryError
	if d.tallies, refusal = s.admit(d.tree); refusal != nil {
		return refusal
	}
	for i, op := range d.tree.Operations {
		if refusal := s.limit(d.tree, d.tallies, op); refusal != nil {
			return refusal
		}
		if within, refusal, fixed := s.count(d.tree, op, nil); fixed {
			if refusal != nil {
				return refusal
			}
			d.costs[i].Store(&within)
		}
	}
	s.print(d)
	return nil
}

// find is the document of req: the one the cache holds, or a new one to parse, or the refusal
// of a persisted query. A request that names its document by hash alone takes its text.
func (s *Schema) find(req *Request) (*document, *gqlerrors.QueryError) {
	if req.Query == "" && req.PersistedHash != "" {
		d := s.documents.get(req.PersistedHash)
		switch {
		case d == nil && s.limits.PersistedOnly:
			return nil, refusedAs(errcode.PersistedQueryNotInList, "the persisted query "+req.PersistedHash+" is not in this server's manifest of persisted queries")
		case d == nil:
			return nil, refusedAs(errcode.PersistedQueryNotFound, "PersistedQueryNotFound")
		}
		req.Query = d.query
		return d, nil
	}
	if n := s.limits.MaxQueryLength; len(req.Query) > n {
		return nil, tooLong(len(req.Query), n)
	}
	hash := hashOf(req.Query)
	if req.PersistedHash != "" && req.PersistedHash != hash {
		return nil, refusedAs(errcode.PersistedQueryHashMismatch, "provided sha does not match query: the sha256Hash of a persisted query is the SHA-256 of its query, in lowercase hex")
	}
	d := s.documents.get(hash)
	switch {
	case d == nil && s.limits.PersistedOnly:
		return nil, refusedAs(errcode.QueryNotInSafelist, "this server runs only the operations of its manifest of persisted queries (persisted_queries_only), and this query is not one of them")
	case d == nil:
		return &document{hash: hash, query: req.Query}, nil
	}
	return d, nil
}

func tooLong(length, limit int) *gqlerrors.QueryError {
	return refusedLimit("max_query_length", errcode.ValidationFailed, nil, "the query is %d bytes long, more than the limit of %d (max_query_length)", length, limit)
}

// refusedAs is a refusal whose Err is its row of errcode's table, whose status the transports
// answer with rather than that of a request error: a persisted query's, and a mutation by GET's
// (Request.NoMutation).
func refusedAs(code errcode.Code, message string) *gqlerrors.QueryError {
	return &gqlerrors.QueryError{Message: message, Extensions: map[string]any{"code": code.GraphQL}, Err: errcode.New(code, message)}
}

// hashOf is the SHA-256 of text, in lowercase hex.
func hashOf(text string) string {
	sum := sha256.Sum256([]byte(text))
	return hex.EncodeToString(sum[:])
}
