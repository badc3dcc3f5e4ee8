// The cache of prepared documents, one per schema and shared by all its requests: what Prepare
// found of a document that no request changes, kept by the SHA-256 of the document's text. A
// request that sends a text seen before, or only its hash (Apollo's automatic persisted queries,
// persisted.go), skips the checks of the text, the parse, the walk of the admission pass and the
// printing, and the cost of an operation that reads no variable; what depends on the request
// (the operation it names, the limits on that operation, its variables, a cost that reads them)
// is checked again on each. A query's document is validated by graphql-go once, on its first
// Execute, and its plan kept with it (plan.go); other operations go through graphql-go's Exec,
// which parses and validates the printed document each time.
//
// Only a document that a request was admitted with is kept, so that a refusal is the same whether
// the document was cached or not: a refused document is parsed and refused again each time. The
// cache is bounded in documents and in bytes, an estimate of the memory they take; a document
// added past either bound evicts the least recently used ones. The documents of a persisted query
// manifest are held apart and never evicted.

package schema

import (
	"container/list"
	"sync"
	"sync/atomic"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/postsedge/caddy-posts/metrics"
)

// document is a query text that passed the checks of Prepare that depend on it alone. Once in
// the cache it is shared by the requests that send the text, which only read it.
type document struct {
	hash    string // the SHA-256 of query, in lowercase hex
	query   string
	tree    *ast.QueryDocument // nil until parsed
	tallies *tallies           // the admission pass's counts
	printed string             // the document graphql-go runs (see Operation)
	shape   *shape             // what the response budget reads of it
	// costs are, by operation (in the order of tree.Operations), set once the cost of an
	// operation that reads no variable is found within max_cost.
	costs []atomic.Pointer[costed]
	// planned is set once graphql-go has validated the document, for a plan (plan.go).
	planned atomic.Pointer[planned]
	size    int64 // what it counts against document_cache_size
}

// costed is what the cost of an operation found, when it is within max_cost.
type costed struct {
	personal bool // the operation selects User.email (see Operation)
}

// parsedBytesPerByte bounds the memory a parsed document takes, per byte of its text: gqlparser
// makes a value, a child and their positions, about 216 bytes, of two bytes of text such as "1 "
// in a list, the densest document there is (TestTheCacheChargesTheMemoryItsDocumentsTake).
const parsedBytesPerByte = 128

// planBytesPerField bounds the memory a plan (plan.go) takes per field of its document,
// fragments expanded: a field, its share of its selection and of the arrays that hold them.
const planBytesPerField = 192

// documentSize is what d counts against the cache's bytes: its text, parsed, the document
// printed from it, and its plan, which expands fragments, so that a short document that spreads
// one many times has a plan larger than its text. The tallies, the shape and the costs count a
// few words per field, which the allowance for the parsed text covers.
func documentSize(d *document) int64 {
	return int64(len(d.query))*parsedBytesPerByte + int64(len(d.printed)) + int64(d.tallies.document.fields)*planBytesPerField
}

// documents is the cache of a schema.
type documents struct {
	maxEntries int
	maxBytes   int64
	persisted  map[string]*document // the manifest's, by hash: written by New, only read after

	mu     sync.Mutex
	byHash map[string]*list.Element
	recent list.List // of *document, the most recently used first
	bytes  int64

	hits, misses, registrations, evictions atomic.Uint64
}

func newDocuments(maxEntries int, maxBytes int64) *documents {
	return &documents{maxEntries: maxEntries, maxBytes: maxBytes, persisted: map[string]*document{}, byHash: map[string]*list.Element{}}
}

// get is the document of hash, or nil; a hit makes it the most recently used.
func (c *documents) get(hash string) *document {
	if d := c.persisted[hash]; d != nil {
		c.hits.Add(1)
		metrics.DocumentCache(metrics.CacheHit)
		return d
	}
	c.mu.Lock()
	e := c.byHash[hash]
	if e != nil {
		c.recent.MoveToFront(e)
	}
	c.mu.Unlock()
	if e == nil {
		c.misses.Add(1)
		metrics.DocumentCache(metrics.CacheMiss)
		return nil
	}
	c.hits.Add(1)
	metrics.DocumentCache(metrics.CacheHit)
	return e.Value.(*document)
}

// add keeps d, a document a request was admitted with, and evicts the least recently used
// documents past the bounds. A document larger than the whole cache is not kept: it would evict
// every other and then itself.
func (c *documents) add(d *document) {
	if d.size > c.maxBytes || c.maxEntries < 1 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, held := c.byHash[d.hash]; held { // another request added it first
		return
	}
	c.byHash[d.hash] = c.recent.PushFront(d)
	c.bytes += d.size
	c.registrations.Add(1)
	metrics.DocumentCache(metrics.CacheRegistration)
	for c.recent.Len() > c.maxEntries || c.bytes > c.maxBytes {
		old := c.recent.Remove(c.recent.Back()).(*document)
		delete(c.byHash, old.hash)
		c.bytes -= old.size
		c.evictions.Add(1)
		metrics.DocumentCache(metrics.CacheEviction)
	}
}

// CacheStats are the counters of a schema's cache of prepared documents.
type CacheStats struct {
	// Hits are the requests whose document was found prepared, in the cache or the manifest.
	Hits uint64
	// Misses are the requests whose document was not: it was parsed and checked whole, or,
	// named by its hash alone, not found.
	Misses uint64
	// Registrations are the documents added to the cache.
	Registrations uint64
	// Evictions are the documents dropped from the cache to keep it within its bounds.
	Evictions uint64
	// Entries are the documents in the cache now, and Bytes the memory they are counted as
	// taking (see document_cache_size); the manifest's documents are not among them.
	Entries int
	Bytes   int64
	// Persisted are the documents of the persisted query manifest.
	Persisted int
}

// CacheStats are the counters of the cache of prepared documents, for monitoring.
func (s *Schema) CacheStats() CacheStats {
	c := s.documents
	c.mu.Lock()
	entries, bytes := c.recent.Len(), c.bytes
	c.mu.Unlock()
	return CacheStats{
		Hits:          c.hits.Load(),
		Misses:        c.misses.Load(),
		Registrations: c.registrations.Load(),
		Evictions:     c.evictions.Load(),
		Entries:       entries,
		Bytes:         bytes,
		Persisted:     len(c.persisted),
	}
}
