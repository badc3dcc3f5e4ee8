package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"

	"github.com/FerretDB/FerretDB/ferretdb"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
)

// socketName is the embedded server's unix socket, inside its data directory.
const socketName = "mongodb.sock"

// maxSocketPath is the longest unix socket path every platform accepts (sun_path less its NUL).
const maxSocketPath = 103

// Embedded returns a Client for an embedded MongoDB-compatible server (FerretDB with its SQLite
// backend) that keeps its files in dataDir. The server starts on first use, listens only on a
// unix socket, and stops when the Client is closed. opts are applied to the driver's client after
// the server's URI (tests set a command monitor with them).
func Embedded(dataDir string, logger *zap.Logger, opts ...*options.ClientOptions) *Client {
	c := &Client{}
	c.start = func(context.Context) (*mongo.Client, error) {
		mc, stop, err := startEmbedded(dataDir, logger, opts)
		c.stop = stop // start and Close both run under c.mu
		return mc, err
	}
	return c
}

// startEmbedded starts the server and returns a client connected to it and the function that
// stops the server. Disconnect the client first: the server waits for open connections.
func startEmbedded(dataDir string, logger *zap.Logger, opts []*options.ClientOptions) (mc *mongo.Client, stop func(), err error) {
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("embedded store: %w", err)
	}
	socket, cleanup, err := socketPath(dataDir)
	if err != nil {
		return nil, nil, err
	}
	// A socket that answers belongs to another process serving the same files; one that does not
	// is left over from a crash.
	if conn, err := net.Dial("unix", socket); err == nil {
		conn.Close()
		return nil, nil, fmt.Errorf("embedded store: %s is in use by another process", dataDir)
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, nil, fmt.Errorf("embedded store: %w", err)
	}
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{Unix: socket},
		Handler:   "sqlite",
		SQLiteURL: (&url.URL{Scheme: "file", Path: dataDir + "/"}).String(),
		Logger:    slog.New(zapslog.NewHandler(warningsOnly(logger).Core())),
	})
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("embedded store: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := f.Run(ctx); err != nil {
			logger.Error("embedded store stopped", zap.Error(err))
		}
	}()
	stopServer := func() {
		cancel()
		<-done
		cleanup()
	}
	mc, err = mongo.Connect(append([]*options.ClientOptions{options.Client().ApplyURI(f.MongoDBURI())}, opts...)...)
	if err != nil {
		stopServer()
		return nil, nil, fmt.Errorf("embedded store: %w", err)
	}
	logger.Info("embedded store started", zap.String("data_dir", dataDir), zap.String("socket", socket))
	return mc, stopServer, nil
}

// socketPath is the socket inside dataDir, or, when that path is too long for a unix socket, one
// in a new private temporary directory that cleanup removes.
func socketPath(dataDir string) (socket string, cleanup func(), err error) {
	socket = filepath.Join(dataDir, socketName)
	if len(socket) <= maxSocketPath {
		return socket, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "caddy-posts-")
	if err != nil {
		return "", nil, fmt.Errorf("embedded store: %w", err)
	}
	return filepath.Join(dir, socketName), func() { os.RemoveAll(dir) }, nil
}

// warningsOnly keeps FerretDB's warnings and errors: it logs every connection at INFO. A logger
// set to a level above WARN already does, and zap refuses to lower its level.
func warningsOnly(logger *zap.Logger) *zap.Logger {
	if !logger.Core().Enabled(zap.InfoLevel) {
		return logger
	}
	return logger.WithOptions(zap.IncreaseLevel(zap.WarnLevel))
}
