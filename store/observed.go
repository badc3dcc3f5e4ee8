package store

import (
	"context"
	"time"
)

// Observer is told of every operation of an observed store: its name (get_post, list_posts,
// insert_post, update_post, delete_post, save_user, get_user, get_users, ping), how long it took
// and its error (nil when it succeeded).
type Observer func(operation string, took time.Duration, err error)

// Observe returns s, telling observe of each of its operations; the caller decides what to make
// of them (caddymodule records metrics), so the backends need not know.
func Observe(s Store, observe Observer) Store { return observed{s, observe} }

type observed struct {
	Store
	observe Observer
}

func (o observed) GetPost(ctx context.Context, id string) (Post, error) {
	start := time.Now()
	p, err := o.Store.GetPost(ctx, id)
	o.observe("get_post", time.Since(start), err)
	return p, err
}

func (o observed) ListPosts(ctx context.Context, f Filter) ([]Post, error) {
	start := time.Now()
	ps, err := o.Store.ListPosts(ctx, f)
	o.observe("list_posts", time.Since(start), err)
	return ps, err
}

func (o observed) InsertPost(ctx context.Context, p Post) (Event, error) {
	start := time.Now()
	e, err := o.Store.InsertPost(ctx, p)
	o.observe("insert_post", time.Since(start), err)
	return e, err
}

func (o observed) UpdatePost(ctx context.Context, id, owner string, version int64, u Update) (Event, error) {
	start := time.Now()
	e, err := o.Store.UpdatePost(ctx, id, owner, version, u)
	o.observe("update_post", time.Since(start), err)
	return e, err
}

func (o observed) DeletePost(ctx context.Context, id, owner string, version int64) (Event, error) {
	start := time.Now()
	e, err := o.Store.DeletePost(ctx, id, owner, version)
	o.observe("delete_post", time.Since(start), err)
	return e, err
}

func (o observed) SaveUser(ctx context.Context, u User) error {
	start := time.Now()
	err := o.Store.SaveUser(ctx, u)
	o.observe("save_user", time.Since(start), err)
	return err
}

func (o observed) GetUser(ctx context.Context, id string) (User, error) {
	start := time.Now()
	u, err := o.Store.GetUser(ctx, id)
	o.observe("get_user", time.Since(start), err)
	return u, err
}

func (o observed) GetUsers(ctx context.Context, ids []string) ([]User, error) {
	start := time.Now()
	us, err := o.Store.GetUsers(ctx, ids)
	o.observe("get_users", time.Since(start), err)
	return us, err
}

func (o observed) Ping(ctx context.Context) error {
	start := time.Now()
	err := o.Store.Ping(ctx)
	o.observe("ping", time.Since(start), err)
	return err
}
