package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// ChangeFilter is what a change stream of the posts follows (REST's GET /posts as a stream):
// the filters of a list, as the client sent them, and the cursor it resumes after.
type ChangeFilter struct {
	// UserID, Search, Since and Until, when not "", keep one user's posts, those a search
	// finds (a list's q), and those created since and until those RFC 3339 times.
	UserID, Search, Since, Until string
	// ResumeFrom is the cursor after which the stream resumes. Its three subscriptions resume
	// from one cursor, a client's or the last position handed (posts.Service.HandedCursor), so
	// that they start together.
	ResumeFrom string
}

// changesDocument is the three subscriptions of a change stream, one for each kind of write,
// whose responses a transport frames as REST's events (ChangeOf): a post's members are selected
// in the order the REST API writes them.
const changesDocument = `subscription created($userId: ID, $search: String, $since: Time, $until: Time) {
  postCreated(userId: $userId, search: $search, since: $since, until: $until) { id userId title body createdAt updatedAt version }
}
subscription updated($userId: ID, $search: String, $since: Time, $until: Time) {
  postUpdated(userId: $userId, search: $search, since: $since, until: $until) { id userId title body createdAt updatedAt version }
}
subscription deleted($userId: ID) {
  postDeleted(userId: $userId)
}`

// prepareChanges prepares changesDocument once, for every change stream. It is the module's own
// document, not a client's: it is held apart from the cache (a client that sends its text is
// prepared as any other), and the limits a site sets on its clients' documents (max_depth,
// persisted_queries_only) do not refuse it.
func (s *Schema) prepareChanges() error {
	d := &document{hash: hashOf(changesDocument), query: changesDocument}
	if refusal := s.parse(d); refusal != nil {
		return fmt.Errorf("the change stream's document: %s", refusal.Message)
	}
	d.tallies, _ = s.admit(d.tree)
	s.print(d)
	s.changes = d
	return nil
}

// ChangesOf is the operations of the change stream that c asks for, one for each kind of write
// (created, updated, deleted), to run on one Sequence, so that their events come in the log's
// order. c's filters are a list's, read by its transport (handlers/rest); the resolvers check them
// again. Its deletes are filtered by the user alone, as the event of one carries its post's
// ids alone. Their resume is the stream's to check and count, once, before it starts
// (Resumable): their replays do neither.
func (s *Schema) ChangesOf(c ChangeFilter) []*Operation {
	filters := map[string]string{"userId": c.UserID, "search": c.Search, "since": c.Since, "until": c.Until}
	d := s.changes
	ops := make([]*Operation, 0, len(d.tree.Operations))
	for _, def := range d.tree.Operations {
		req := Request{Query: d.query, OperationName: def.Name, Variables: map[string]any{}}
		for _, v := range def.VariableDefinitions {
			if value := filters[v.Variable]; value != "" {
				req.Variables[v.Variable] = value
			}
		}
		ops = append(ops, &Operation{Type: "subscription", Name: def.Name, request: req, document: d.printed, shape: d.shape,
			root: def.SelectionSet, doc: d, def: def, resumeFrom: c.ResumeFrom, checked: true})
	}
	return ops
}

// changeKinds are the kinds of a change stream's events, by how a response of its operation
// begins (encode).
var changeKinds = []struct{ kind, prefix string }{
	{"created", `{"data":{"postCreated":`},
	{"updated", `{"data":{"postUpdated":`},
	{"deleted", `{"data":{"postDeleted":`},
}

// ChangeOf is the event that payload, a response of a change stream's operation (ChangesOf),
// stands for: its kind (created, updated, deleted) and its post as the REST API writes one (a
// delete's as {"id": …} alone), read from the bytes encode wrote, with no copy but a body's
// null left out. ok is false for a response that answers no post: an event's error
// (RESPONSE_TOO_LARGE).
func ChangeOf(payload json.RawMessage) (kind string, post []byte, ok bool) {
	for _, k := range changeKinds {
		rest, found := bytes.CutPrefix(payload, []byte(k.prefix))
		if !found {
			continue
		}
		end := `}}`
		if cursor := CursorOf(payload); cursor != "" {
			end = `},` + cursorMember + cursor + `"}}`
		}
		if rest, found = bytes.CutSuffix(rest, []byte(end)); !found {
			return "", nil, false
		}
		if k.kind == "deleted" { // the id, a JSON string
			return k.kind, append(append([]byte(`{"id":`), rest...), '}'), true
		}
		// A post without a body: REST leaves the member out. No string of the JSON holds
		// these bytes: a quote in one is escaped.
		if i := bytes.Index(rest, []byte(`,"body":null,`)); i >= 0 {
			rest = append(append(rest[:i:i], ','), rest[i+len(`,"body":null,`):]...)
		}
		return k.kind, rest, true
	}
	return "", nil, false
}
