package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.mongodb.org/mongo-driver/v2/x/mongo/driver/topology"
)

// Client is a pooled connection to one MongoDB deployment, to be shared by every config that
// names it. It connects on first use, so creating one never needs a reachable database.
type Client struct {
	ready  atomic.Pointer[mongo.Client]
	mu     sync.Mutex // serializes start and Close
	start  func(context.Context) (*mongo.Client, error)
	stop   func() // releases what start started, after the client disconnects
	closed bool
}

var (
	// ErrNotFound means no document matched.
	ErrNotFound = errors.New("no matching document")
	// ErrUnavailable means the database could not be reached or did not answer in time.
	ErrUnavailable = errors.New("database unavailable")
)

// Connect returns a Client for the deployment that uri names (any mongodb:// or mongodb+srv://
// URI). It does no I/O: the driver connects when it is first used.
func Connect(uri string) (*Client, error) {
	mc, err := mongo.Connect(options.Client().ApplyURI(uri))
	if err != nil {
		return nil, fmt.Errorf("mongodb_uri: %w", err)
	}
	c := &Client{}
	c.ready.Store(mc)
	return c, nil
}

// mongo returns the connected driver client, starting what start starts on first use.
func (c *Client) mongo(ctx context.Context) (*mongo.Client, error) {
	if mc := c.ready.Load(); mc != nil {
		return mc, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if mc := c.ready.Load(); mc != nil {
		return mc, nil
	}
	if c.closed {
		return nil, mongo.ErrClientDisconnected
	}
	mc, err := c.start(ctx)
	if err != nil {
		return nil, err
	}
	c.ready.Store(mc)
	return mc, nil
}

// Close disconnects the client and stops anything it started. Requests still in flight fail
// with ErrUnavailable.
func (c *Client) Close(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	var err error
	if mc := c.ready.Load(); mc != nil {
		err = mc.Disconnect(ctx)
	}
	if c.stop != nil {
		c.stop()
	}
	return err
}

// classify maps the driver's errors to ErrNotFound and ErrUnavailable, keeping the original
// in the chain for the log.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, mongo.ErrNoDocuments):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case mongo.IsTimeout(err), mongo.IsNetworkError(err),
		errors.Is(err, context.Canceled), errors.Is(err, mongo.ErrClientDisconnected),
		errors.As(err, &topology.ServerSelectionError{}):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// Redact returns uri without credentials or options, fit for a log line.
func Redact(uri string) string {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		return "(not a URI)"
	}
	// User info first, up to the last @: a password may hold an unescaped / or ?.
	if i := strings.LastIndex(rest, "@"); i >= 0 {
		rest = rest[i+1:]
	}
	if i := strings.IndexAny(rest, "/?"); i >= 0 {
		rest = rest[:i]
	}
	return scheme + "://" + rest
}
