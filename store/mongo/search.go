package mongo

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	driver "go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/words"
)

// The search on MongoDB (store.Filter.Search). Each post's document holds its words, words.Of
// of its title and body, in terms: set in the same one write as the post on every path
// (InsertPost, UpdatePost, InsertPosts), so that a search never lags a write. The multikey index
// termsIndex serves a search as the other indexes serve the lists (searchTerms): each whole word
// an equality on terms, which MongoDB reads from the index in the order of the list, forwards or
// backwards, stopping at the limit; the last word's prefix an anchored regular expression of it
// as text, which it reads as a range of the index, and sorts (or, for a prefix of many posts,
// its planner reads the index of the order and filters, as it finds faster). FerretDB v1 scans
// instead.
//
// Documents of earlier releases have no terms. A store's first use looks for one (termsAbsent,
// on termsIndex); if there is one, it runs the backfill (Store.backfill) in the background,
// which gives them theirs in batches of backfillBatch, each under backfillTimeout, and each
// post's only where it still has none at the version read: a write since then set its own
// terms, which the backfill never overwrites. Every instance of a deployment may run it at once;
// what one did, another's finds done. Until a store has found none left, its searches answer
// store.ErrIndexing (errIndexing) rather than a list that would miss some: lists without a
// search are unaffected. The backfill ends when the store closes (Store.Close).

// termsIndex is the index of a search: a post's terms, then the order of lists.
var termsIndex = driver.IndexModel{Keys: bson.D{{Key: "terms", Value: 1}, {Key: "createdAt", Value: -1}, {Key: "_id", Value: -1}}}

// errIndexing is a search asked of a store whose backfill has not finished.
var errIndexing = fmt.Errorf("%w: posts written before the search index are being indexed", store.ErrIndexing)

// termsOf returns the terms of a post of title and body: never nil, so that a post without a
// word holds an empty array, and is not taken for a post of an earlier release (termsAbsent).
func termsOf(title string, body *string) []string {
	texts := []string{title}
	if body != nil {
		texts = append(texts, *body)
	}
	if terms := words.Of(texts...); terms != nil {
		return terms
	}
	return []string{}
}

// searchTerms is the condition on terms of a search: its whole words, each one of the terms
// ($all), and its prefix the beginning of one, an anchored regular expression of the prefix
// quoted (regexp.QuoteMeta), so that nothing of a query is read as syntax. The tokenizer keeps
// only letters and digits in a word already; the quoting holds whatever it keeps.
func searchTerms(q words.Query) bson.E {
	var cond bson.D
	if whole := q.Whole(); len(whole) > 0 {
		cond = append(cond, bson.E{Key: "$all", Value: whole})
	}
	if prefix := q.Prefix(); prefix != "" {
		cond = append(cond, bson.E{Key: "$regex", Value: bson.Regex{Pattern: "^" + regexp.QuoteMeta(prefix)}})
	}
	return bson.E{Key: "terms", Value: cond}
}

// termsAbsent selects the posts that have no terms yet: written by an earlier release. Deleted
// posts (tombstones, kept ids) are not searched, and need none.
var termsAbsent = bson.D{live, {Key: "terms", Value: absent}}

// The batches and pace of the backfill; variables for the tests.
var (
	backfillBatch = 500
	// backfillWrites is how many of a batch's updates one command sends: FerretDB v1 holds a
	// connection of its pool of 100 for each update of a command that matches a document until
	// the command ends, so that a command of 100 or more never ends, and its database stops
	// answering anything.
	backfillWrites  = 16
	backfillTimeout = 30 * time.Second
	// backfillRetry is the first wait after a batch that failed or could not write, doubled
	// after each such batch up to backfillRetryMax.
	backfillRetry    = time.Second
	backfillRetryMax = 30 * time.Second
	// backfillReport is how often the backfill logs its progress.
	backfillReport = 10 * time.Second
)

// SetLogger sets the logger of the store's few events (the backfill of the search index's
// progress); before its first use. Default: none.
func (s *Store) SetLogger(logger *zap.Logger) { s.logger = logger }

// log is the store's logger, or one that logs nothing.
func (s *Store) log() *zap.Logger {
	if s.logger == nil {
		return zap.NewNop()
	}
	return s.logger
}

// startIndexing is the last step of the first use of the posts collection: it finds whether a
// post has no terms, and if one has, runs the backfill until it has found none left; otherwise
// searches are answered at once.
func (s *Store) startIndexing(ctx context.Context, c *driver.Collection) error {
	err := c.FindOne(ctx, termsAbsent, options.FindOne().SetProjection(bson.D{{Key: "_id", Value: 1}})).Err()
	if errors.Is(err, driver.ErrNoDocuments) {
		s.searchable.Store(true)
		return nil
	}
	if err != nil {
		return fmt.Errorf("looking for posts without terms: %w", err)
	}
	s.background.Lock()
	defer s.background.Unlock()
	if !s.closed.Load() { // Close waits for what it finds started, and stops it
		s.background.running.Go(func() { s.backfill(s.life, c) })
	}
	return nil
}

// backfill gives terms to the posts that have none, a batch at a time, until it finds none left
// (then the store answers searches) or ctx ends: the store closed. A batch that fails is tried
// again after a wait that grows. A batch that stores nothing found posts that another instance
// or a write gave terms since it read them, and the next batch reads again at once; unless it
// finds the same first post again, which it cannot write (a version that is not a number): then
// it waits as after a failure.
func (s *Store) backfill(ctx context.Context, c *driver.Collection) {
	log := s.log()
	log.Info("indexing the posts of an earlier release for search; until done, searches answer that the index is being built")
	start, reported, indexed := time.Now(), time.Now(), 0
	wait := backfillRetry
	var unwritten bson.ObjectID // the first post of the last batch that stored nothing
	for {
		n, first, err := s.indexBatch(ctx, c)
		if ctx.Err() != nil {
			log.Info("indexing posts for search stopped: the store closed", zap.Int("posts", indexed))
			return
		}
		indexed += n
		switch {
		case err == nil && first.IsZero():
			s.searchable.Store(true)
			log.Info("indexed the posts of an earlier release for search", zap.Int("posts", indexed), zap.Duration("took", time.Since(start)))
			return
		case err == nil && n == 0 && first != unwritten:
			unwritten = first
			continue
		case err != nil || n == 0:
			if err != nil {
				log.Warn("indexing posts for search: a batch failed; trying again", zap.Duration("in", wait), zap.Error(err))
			} else {
				log.Warn("indexing posts for search: a batch stored none of the posts it read; trying again",
					zap.String("post_id", first.Hex()), zap.Duration("in", wait))
			}
			select {
			case <-ctx.Done():
				continue // logs the stop
			case <-time.After(wait):
			}
			wait = min(2*wait, backfillRetryMax)
			continue
		}
		wait = backfillRetry
		if time.Since(reported) >= backfillReport {
			reported = time.Now()
			log.Info("indexing the posts of an earlier release for search", zap.Int("posts", indexed), zap.Duration("so_far", time.Since(start)))
		}
	}
}

// indexBatch gives terms to at most backfillBatch posts that have none, under backfillTimeout:
// one query, then one unordered bulk write of an update per post, each conditioned on the
// post still having no terms at the version read. It returns how many it gave terms to, and the
// first post it found without (the zero ObjectID for none).
func (s *Store) indexBatch(ctx context.Context, c *driver.Collection) (int, bson.ObjectID, error) {
	ctx, cancel := context.WithTimeout(ctx, backfillTimeout)
	defer cancel()
	cur, err := c.Find(ctx, termsAbsent, options.Find().SetLimit(int64(backfillBatch)).SetBatchSize(int32(backfillBatch)).
		SetProjection(bson.D{{Key: "title", Value: 1}, {Key: "body", Value: 1}, {Key: "version", Value: 1}}))
	if err != nil {
		return 0, bson.ObjectID{}, err
	}
	var docs []post
	if err := cur.All(ctx, &docs); err != nil || len(docs) == 0 {
		return 0, bson.ObjectID{}, err
	}
	if s.backfillRead != nil {
		s.backfillRead(ctx, docs)
	}
	models := make([]driver.WriteModel, len(docs))
	for i, d := range docs {
		// The version read, absent on a post that no first use has given one yet.
		var version any = d.Version
		if d.Version == 0 {
			version = absent
		}
		models[i] = driver.NewUpdateOneModel().
			SetFilter(bson.D{{Key: "_id", Value: d.ID}, {Key: "version", Value: version}, {Key: "terms", Value: absent}}).
			SetUpdate(bson.D{{Key: "$set", Value: bson.D{{Key: "terms", Value: termsOf(d.Title, d.Body)}}}})
	}
	var modified int
	for chunk := range slices.Chunk(models, backfillWrites) {
		res, err := c.BulkWrite(ctx, chunk, options.BulkWrite().SetOrdered(false))
		if res != nil {
			modified += int(res.ModifiedCount)
		}
		if err != nil {
			return modified, docs[0].ID, err
		}
	}
	return modified, docs[0].ID, nil
}
