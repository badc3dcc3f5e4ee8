// Package mongotest runs FerretDB (v1, on its SQLite backend) in-process as the MongoDB-wire
// server of tests, and names a real MongoDB when MONGODB_URI is set. Only tests import it, so
// FerretDB never reaches the caddy binary.
package mongotest

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/FerretDB/FerretDB/ferretdb"
)

// Server is a FerretDB serving one directory on a unix socket.
type Server struct {
	// URI is the server's mongodb:// URI.
	URI string
	// Socket is the path of its unix socket, for tests that put a proxy in front of it.
	Socket string
	stop   func()
}

// Start runs a FerretDB that keeps its files in dir, until Close.
func Start(dir string) (*Server, error) {
	// A unix socket path is short (104 bytes on some systems): it gets a directory of its own.
	sockDir, err := os.MkdirTemp("", "ferretdb-")
	if err != nil {
		return nil, err
	}
	socket := filepath.Join(sockDir, "mongodb.sock")
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{Unix: socket},
		Handler:   "sqlite",
		SQLiteURL: (&url.URL{Scheme: "file", Path: dir + "/"}).String(),
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		os.RemoveAll(sockDir)
		return nil, fmt.Errorf("ferretdb: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.Run(ctx)
	}()
	return &Server{
		URI:    "mongodb://" + url.QueryEscape(socket) + "/",
		Socket: socket,
		stop: func() {
			cancel()
			<-done
			os.RemoveAll(sockDir)
		},
	}, nil
}

// Close stops the server. Disconnect its clients first: it waits for open connections.
func (s *Server) Close() { s.stop() }

// FerretDB starts a server for the test on a directory of its own, stopped when the test ends.
func FerretDB(t testing.TB) *Server {
	t.Helper()
	s, err := Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// MongoDBURI is the URI of a real MongoDB to run the tests against as well, from the
// environment variable MONGODB_URI; empty when it is not set.
func MongoDBURI() string { return os.Getenv("MONGODB_URI") }
