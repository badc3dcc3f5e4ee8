package posts

import (
	"context"
	"errors"
	"time"

	"github.com/postsedge/caddy-posts/store"
	"github.com/postsedge/caddy-posts/store/words"
)

// DefaultLimit is the number of posts in a page when the request names no limit.
const DefaultLimit = 20

// ListQuery selects a page of posts, newest first unless Oldest.
type ListQuery struct {
	UserID string // only this user's posts, when not empty
	// Search keeps the posts it finds (ParseSearch reads it), all when empty.
	Search words.Query
	// Since and Until, when not zero, keep the posts created at Since or later, and before
	// Until; Since must be before Until.
	Since, Until time.Time
	// Oldest lists oldest first.
	Oldest bool
	Limit  int    // 0 means DefaultLimit
	After  string // a cursor from an earlier Page of the same list (Page.Next, ListQuery.Cursor)
}

// Page is one page of a list.
type Page struct {
	Posts []Post
	// Next is the cursor of the following page, empty on the last page.
	Next string
	// list is the query of the list the page is of.
	list ListQuery
}

// Cursor is the cursor of p in the page's list: the list with it as After starts after p.
func (page Page) Cursor(p Post) string { return page.list.Cursor(p) }

// User is a user as a caller may see it.
type User struct {
	ID   string
	Name *string
	// Email is the user's own: it is set only when the caller is that user.
	Email *string
}

// Get returns the post with the id.
func (s *Service) Get(ctx context.Context, id string) (Post, error) {
	id, err := parseID(id)
	if err != nil {
		return Post{}, err
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	post, err := s.store.GetPost(ctx, id)
	if err != nil {
		return Post{}, fromStore(err)
	}
	return toPost(post), nil
}

// List returns a page of the posts q selects, in its order. A search of a store still building
// its index fails with ErrIndexing.
func (s *Service) List(ctx context.Context, q ListQuery) (Page, error) {
	limit := q.Limit
	if limit == 0 {
		limit = min(DefaultLimit, s.maxLimit)
	}
	if limit < 1 || limit > s.maxLimit {
		return Page{}, invalid("limit", "limit must be from 1 to %d", s.maxLimit)
	}
	since, until, err := TimeRange(q.Since, q.Until)
	if err != nil {
		return Page{}, err
	}
	// One more post than the page tells whether a next page exists.
	f := store.Filter{UserID: q.UserID, Search: q.Search, Since: since, Until: until, Oldest: q.Oldest, Limit: limit + 1}
	if q.After != "" {
		key, ofAnother, ok := q.cursorOf(q.After)
		switch {
		case !ok:
			return Page{}, invalid("after", "after is not a cursor from this API; follow the next link of the previous page")
		case ofAnother:
			return Page{}, invalid("after", "after is a cursor of another list: page with the sort, filters and search of the page that gave it")
		}
		f.After = &key
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	found, err := s.store.ListPosts(ctx, f)
	if err != nil {
		return Page{}, fromStore(err)
	}
	page := Page{Posts: make([]Post, min(len(found), limit)), list: q}
	for i := range page.Posts {
		page.Posts[i] = toPost(found[i])
	}
	if len(found) > limit {
		page.Next = q.Cursor(page.Posts[limit-1])
	}
	return page, nil
}

// User returns the user with the id: the saved profile, or just the id for a user who has posts
// but no profile. found is false when the user has neither.
func (s *Service) User(ctx context.Context, caller Caller, id string) (User, bool, error) {
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	saved, err := s.store.GetUser(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		posts, err := s.store.ListPosts(ctx, store.Filter{UserID: id, Limit: 1})
		if err != nil || len(posts) == 0 {
			return User{}, false, fromStore(err)
		}
		return User{ID: id}, true, nil
	}
	if err != nil {
		return User{}, false, fromStore(err)
	}
	return profile(caller, saved), true, nil
}

// Authors returns the authors of ps by user id, read in one query: the saved profile, or the id
// alone for an author without one. As with User, an email is set only for the caller.
func (s *Service) Authors(ctx context.Context, caller Caller, ps []Post) (map[string]User, error) {
	authors := make(map[string]User)
	var ids []string
	for _, p := range ps {
		if _, ok := authors[p.UserID]; !ok {
			authors[p.UserID] = User{ID: p.UserID}
			ids = append(ids, p.UserID)
		}
	}
	if len(ids) == 0 {
		return authors, nil
	}
	ctx, cancel := s.bounded(ctx)
	defer cancel()
	saved, err := s.store.GetUsers(ctx, ids)
	if err != nil {
		return nil, fromStore(err)
	}
	for _, u := range saved {
		authors[u.ID] = profile(caller, u)
	}
	return authors, nil
}

// profile is a saved user as caller may see it.
func profile(caller Caller, saved store.User) User {
	user := User{ID: saved.ID, Name: saved.Name}
	if caller.UserID == saved.ID {
		user.Email = saved.Email
	}
	return user
}
