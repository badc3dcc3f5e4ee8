package posts

import (
	"context"
	"errors"

	"github.com/postsedge/caddy-posts/store"
)

// NewPost is the input of Create.
type NewPost struct {
	Title string
	Body  *string // nil: no body
}

// Change is one member of a partial update: left alone (Set false), set to a value, or set to
// null (Set true, Value nil).
type Change struct {
	Set   bool
	Value *string
}

// Changes is the input of Update: only the members that are Set change.
type Changes struct {
	Title Change
	Body  Change // null removes the body
}

// Create stores a new post by the caller.
func (s *Service) Create(ctx context.Context, caller Caller, in NewPost) (Post, error) {
	if err := s.Allow(caller, Write); err != nil {
		return Post{}, err
	}
	title, err := validTitle(in.Title)
	if err != nil {
		return Post{}, err
	}
	if err := validBody(in.Body); err != nil {
		return Post{}, err
	}
	t := timestamp()
	post := Post{ID: store.NewID(t), UserID: caller.UserID, Title: title, Body: in.Body, CreatedAt: t, UpdatedAt: t, Version: 1}
	if r := reservationOf(ctx); r != nil { // under an idempotency key (idempotency.go)
		post.ID = r.record.PostID
		return s.createReserved(ctx, caller, r, post)
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	e, err := s.store.InsertPost(ctx, toStore(post))
	if err != nil {
		return Post{}, s.failed(err)
	}
	s.written(ctx, caller, e)
	return post, nil
}

// Update changes the caller's post, if it is as expected, in one atomic write that adds one to
// its version, and returns it as it is afterwards.
func (s *Service) Update(ctx context.Context, caller Caller, id string, ch Changes, expect Expect) (Post, error) {
	if err := s.Allow(caller, Write); err != nil {
		return Post{}, err
	}
	u, err := validUpdate(ch)
	if err != nil {
		return Post{}, err
	}
	id, err = parseID(id)
	if err != nil {
		return Post{}, err
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	version, err := s.atVersion(ctx, caller, id, expect)
	if err != nil {
		return Post{}, err
	}
	e, err := s.store.UpdatePost(ctx, id, caller.UserID, version, u)
	if errors.Is(err, store.ErrNotFound) {
		return Post{}, s.whyNotWritten(ctx, caller, id, expect)
	}
	if err != nil {
		return Post{}, s.failed(err)
	}
	s.written(ctx, caller, e)
	return toPost(e.Post), nil
}

// Delete deletes the caller's post, if it is as expected.
func (s *Service) Delete(ctx context.Context, caller Caller, id string, expect Expect) error {
	if err := s.Allow(caller, Write); err != nil {
		return err
	}
	id, err := parseID(id)
	if err != nil {
		return err
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	version, err := s.atVersion(ctx, caller, id, expect)
	if err != nil {
		return err
	}
	e, err := s.store.DeletePost(ctx, id, caller.UserID, version)
	if errors.Is(err, store.ErrNotFound) {
		return s.whyNotWritten(ctx, caller, id, expect)
	}
	if err != nil {
		return s.failed(err)
	}
	s.written(ctx, caller, e)
	return nil
}

// validUpdate checks ch by the rules of text and turns it into the store's update, stamped now.
func validUpdate(ch Changes) (store.Update, error) {
	if !ch.Title.Set && !ch.Body.Set {
		return store.Update{}, invalid("", "the update is empty: give title, body or both")
	}
	u := store.Update{UpdatedAt: timestamp()}
	if ch.Title.Set {
		if ch.Title.Value == nil {
			return store.Update{}, invalid("title", "title cannot be null: every post has a title")
		}
		title, err := validTitle(*ch.Title.Value)
		if err != nil {
			return store.Update{}, err
		}
		u.Title = &title
	}
	if ch.Body.Set {
		if err := validBody(ch.Body.Value); err != nil {
			return store.Update{}, err
		}
		u.Body, u.UnsetBody = ch.Body.Value, ch.Body.Value == nil
	}
	return u, nil
}
