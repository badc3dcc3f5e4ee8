package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"iter"
	"time"
)

// DefaultCopyBatch is how many posts or profiles Copy reads and writes at a time by default.
const DefaultCopyBatch = 1000

// MaxBatchBytes bounds the text of a batch that a copy reads or writes, whatever its count: a
// thousand posts at the longest body would otherwise hold 200 MB.
const MaxBatchBytes = 8 << 20

// Size is about the bytes p holds, to bound batches by.
func (p Post) Size() int { return 64 + len(p.ID) + len(p.UserID) + len(p.Title) + length(p.Body) }

// Size is about the bytes u holds, to bound batches by.
func (u User) Size() int { return 32 + len(u.ID) + length(u.Name) + length(u.Email) }

func length(s *string) int {
	if s == nil {
		return 0
	}
	return len(*s)
}

// CopyOptions tune Copy; the zero value is the default.
type CopyOptions struct {
	// Batch is how many posts or profiles are read and written at a time; default
	// DefaultCopyBatch. A batch also ends at MaxBatchBytes.
	Batch int
	// Progress, when set, is called after each batch copied or compared.
	Progress func(CopyProgress)
}

// CopyProgress is where a copy is.
type CopyProgress struct {
	// Stage is "copying posts", "copying profiles", "comparing posts" or "comparing profiles".
	Stage string
	// Done is how many of the source's posts or profiles the stage has been through.
	Done int
	// Inserted is how many of them the stage stored on the target.
	Inserted int
}

// Copied is what Copy stored and what its comparison of the two stores found.
type Copied struct {
	Posts, Users Comparison
}

// OK says whether the target holds every post and profile of the source, unchanged.
func (c Copied) OK() bool { return c.Posts.OK() && c.Users.OK() }

// Comparison is what a copy of posts or of profiles did, and how the two sides compare after it.
type Comparison struct {
	// Source and Target are how many each side holds.
	Source, Target int
	// Copied is how many the copy read from the source, and Inserted how many of them it
	// stored on the target; the others were there already.
	Copied, Inserted int
	// Missing are on the source, not on the target; Differing are on both with different
	// content, left on the target as they were; Extra are on the target only (it held them
	// before the copy).
	Missing, Differing, Extra int
	// MissingIDs and DifferingIDs are the first few of them, to look at.
	MissingIDs, DifferingIDs []string
	// SourceSum and TargetSum are the SHA-256, in hex, of each side's ids in ascending order,
	// each followed by a newline: what `sqlite3 posts.db 'SELECT id FROM posts ORDER BY id' |
	// sha256sum` prints. They are equal when OK and Extra is 0.
	SourceSum, TargetSum string
}

// OK says whether every one of the source is on the target, unchanged.
func (c Comparison) OK() bool { return c.Missing == 0 && c.Differing == 0 }

// examples is how many ids of the missing or differing a Comparison keeps.
const examples = 5

// Copy stores on to every post and profile of from that to does not hold yet, a batch at a
// time, in ascending id order; posts and profiles that to holds already are left as they are,
// so that a copy that stopped half-way completes when run again. Then it reads both stores
// again side by side and compares them, field by field, and by counts and checksums of ids.
// Memory stays bounded by the batch, whatever the stores' sizes. An error ends it where it was
// (a Copied that is not OK without one means the stores differ).
func Copy(ctx context.Context, from CopySource, to CopyTarget, opts CopyOptions) (Copied, error) {
	c := copier{batch: cmp.Or(opts.Batch, DefaultCopyBatch), progress: opts.Progress}
	if c.progress == nil {
		c.progress = func(CopyProgress) {}
	}
	var done Copied
	if err := copyAll(ctx, c, "posts", from.AllPosts(ctx, c.batch), to.InsertPosts, postID, Post.Size, &done.Posts); err != nil {
		return done, err
	}
	if err := copyAll(ctx, c, "profiles", from.AllUsers(ctx, c.batch), to.InsertUsers, userID, User.Size, &done.Users); err != nil {
		return done, err
	}
	if err := compare(c, "posts", from.AllPosts(ctx, c.batch), to.AllPosts(ctx, c.batch), postID, samePost, &done.Posts); err != nil {
		return done, err
	}
	return done, compare(c, "profiles", from.AllUsers(ctx, c.batch), to.AllUsers(ctx, c.batch), userID, sameUser, &done.Users)
}

type copier struct {
	batch    int
	progress func(CopyProgress)
}

func postID(p Post) string { return p.ID }
func userID(u User) string { return u.ID }

func samePost(a, b Post) bool {
	return a.ID == b.ID && a.UserID == b.UserID && a.Title == b.Title && sameText(a.Body, b.Body) &&
		sameTime(a.CreatedAt, b.CreatedAt) && sameTime(a.UpdatedAt, b.UpdatedAt) && a.Version == b.Version
}

func sameUser(a, b User) bool {
	return a.ID == b.ID && sameText(a.Name, b.Name) && sameText(a.Email, b.Email) && sameTime(a.UpdatedAt, b.UpdatedAt)
}

// sameText tells no text from an empty one.
func sameText(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// sameTime compares to the millisecond, the precision both stores keep.
func sameTime(a, b time.Time) bool { return a.UnixMilli() == b.UnixMilli() }

// copyAll inserts the values of from in batches of c.batch or MaxBatchBytes, and counts in
// into how many it read and how many of them insert stored.
func copyAll[T any](ctx context.Context, c copier, kind string, from iter.Seq2[T, error],
	insert func(context.Context, []T) (int, error), id func(T) string, size func(T) int, into *Comparison) error {
	stage := "copying " + kind
	batch, bytes := make([]T, 0, c.batch), 0
	flush := func() error {
		n, err := insert(ctx, batch)
		if err != nil {
			return fmt.Errorf("%s: %w", stage, err)
		}
		into.Copied += len(batch)
		into.Inserted += n
		batch, bytes = batch[:0], 0
		c.progress(CopyProgress{Stage: stage, Done: into.Copied, Inserted: into.Inserted})
		return nil
	}
	order := ascending[T]{kind: kind, side: "source", id: id}
	for v, err := range from {
		if err == nil {
			err = order.check(v)
		}
		if err != nil {
			return fmt.Errorf("%s: reading the source: %w", stage, err)
		}
		batch = append(batch, v)
		if bytes += size(v); len(batch) == c.batch || bytes >= MaxBatchBytes {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if len(batch) > 0 {
		return flush()
	}
	return nil
}

// ascending checks that the ids one side yields ascend, which the comparison's merge relies on,
// and sums them.
type ascending[T any] struct {
	kind, side string
	id         func(T) string
	last       string
	count      int
	sum        hash.Hash
}

func (a *ascending[T]) check(v T) error {
	id := a.id(v)
	if a.count > 0 && id <= a.last {
		return fmt.Errorf("the %s yields %s %q after %q, not in ascending order of ids", a.side, a.kind, id, a.last)
	}
	a.last = id
	a.count++
	if a.sum != nil {
		a.sum.Write([]byte(id + "\n"))
	}
	return nil
}

// cursor is one side of a comparison: the value it is at, if ok.
type cursor[T any] struct {
	next  func() (T, error, bool)
	order ascending[T]
	at    T
	ok    bool
}

func (c *cursor[T]) advance() error {
	var err error
	if c.at, err, c.ok = c.next(); err != nil || !c.ok {
		c.ok = false
		return err
	}
	return c.order.check(c.at)
}

// compare reads both sides in ascending id order at once, merging them, and counts what each
// holds that the other does not, and what both hold with different content.
func compare[T any](c copier, kind string, source, target iter.Seq2[T, error], id func(T) string, same func(a, b T) bool, result *Comparison) error {
	stage := "comparing " + kind
	open := func(name string, values iter.Seq2[T, error]) (*cursor[T], func(), error) {
		next, stop := iter.Pull2(values)
		side := &cursor[T]{next: next, order: ascending[T]{kind: kind, side: name, id: id, sum: sha256.New()}}
		return side, stop, side.advance()
	}
	src, stopSrc, err := open("source", source)
	defer stopSrc()
	if err != nil {
		return fmt.Errorf("%s: reading the source: %w", stage, err)
	}
	dst, stopDst, err := open("target", target)
	defer stopDst()
	if err != nil {
		return fmt.Errorf("%s: reading the target: %w", stage, err)
	}
	for src.ok || dst.ok {
		var moveSrc, moveDst bool
		switch {
		case !src.ok || dst.ok && id(dst.at) < id(src.at):
			result.Extra++
			moveDst = true
		case !dst.ok || id(src.at) < id(dst.at):
			result.Missing++
			note(&result.MissingIDs, id(src.at))
			moveSrc = true
		default:
			if !same(src.at, dst.at) {
				result.Differing++
				note(&result.DifferingIDs, id(src.at))
			}
			moveSrc, moveDst = true, true
		}
		if moveDst {
			if err := dst.advance(); err != nil {
				return fmt.Errorf("%s: reading the target: %w", stage, err)
			}
		}
		if moveSrc {
			if err := src.advance(); err != nil {
				return fmt.Errorf("%s: reading the source: %w", stage, err)
			}
			if src.order.count%c.batch == 0 {
				c.progress(CopyProgress{Stage: stage, Done: src.order.count})
			}
		}
	}
	result.Source, result.Target = src.order.count, dst.order.count
	result.SourceSum, result.TargetSum = hex.EncodeToString(src.order.sum.Sum(nil)), hex.EncodeToString(dst.order.sum.Sum(nil))
	c.progress(CopyProgress{Stage: stage, Done: result.Source})
	return nil
}

// note keeps id among the first few ids.
func note(ids *[]string, id string) {
	if len(*ids) < examples {
		*ids = append(*ids, id)
	}
}
