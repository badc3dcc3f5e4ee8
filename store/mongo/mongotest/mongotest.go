// Package mongotest runs FerretDB (v1, on its SQLite backend) in-process as the MongoDB-wire
// server of tests, and names a real MongoDB when MONGODB_URI is set. Only tests import it, so
// FerretDB never reaches the caddy binary.
package mongotest

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/FerretDB/FerretDB/ferretdb"
)

// Server is a FerretDB serving one directory on a unix socket.
type Server struct {
	// URI is the server's mongodb:// URI.
	URI string
	// Socket is the path of its unix socket, for tests that put a proxy in front of it.
	Socket string
	// Writes is the unix socket of the proxy that URI names when FerretDB started the server
	// (OneWriteAtATime's), for tests that put another proxy in front of it and keep its one
	// write at a time; "" for Start's.
	Writes string
	stop   func()
}

// Start runs a FerretDB that keeps its files in dir, until Close.
func Start(dir string) (*Server, error) {
	// A unix socket path is short (104 bytes on some systems): it gets a directory of its own.
	sockDir, err := os.MkdirTemp("", "ferretdb-")
	if err != nil {
		return nil, err
	}
	s, err := StartOn(dir, filepath.Join(sockDir, "mongodb.sock"))
	if err != nil {
		os.RemoveAll(sockDir)
		return nil, err
	}
	stop := s.stop
	s.stop = func() {
		stop()
		os.RemoveAll(sockDir)
	}
	return s, nil
}

// StartOn runs a FerretDB that keeps its files in dir and listens on the unix socket path,
// until Close. A socket left at path by a process that was killed is replaced, so that a server
// can be started again where the last one served (a test's standalone FerretDB process).
func StartOn(dir, path string) (*Server, error) {
	if err := removeSocket(path); err != nil {
		return nil, err
	}
	starting.Lock()
	f, err := ferretdb.New(&ferretdb.Config{
		Listener:  ferretdb.ListenerConfig{Unix: path},
		Handler:   "sqlite",
		SQLiteURL: (&url.URL{Scheme: "file", Path: dir + "/"}).String(),
		Logger:    slog.New(slog.DiscardHandler),
	})
	starting.Unlock()
	if err != nil {
		return nil, fmt.Errorf("ferretdb: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = f.Run(ctx)
	}()
	return &Server{
		URI:    SocketURI(path),
		Socket: path,
		stop: func() {
			cancel()
			<-done
		},
	}, nil
}

// starting serialises ferretdb.New, which sets a variable of FerretDB's package (its version's
// Package): the race detector fails tests that start servers in parallel without it.
var starting sync.Mutex

// SocketURI is the mongodb:// URI of a server on the unix socket path.
func SocketURI(path string) string { return "mongodb://" + url.QueryEscape(path) + "/" }

// removeSocket removes a unix socket left at path, and nothing else.
func removeSocket(path string) error {
	if info, err := os.Lstat(path); err == nil && info.Mode()&os.ModeSocket != 0 {
		return os.Remove(path)
	} else if err == nil {
		return fmt.Errorf("%s is not a unix socket", path)
	}
	return nil
}

// Close stops the server. Disconnect its clients first: it waits for open connections.
func (s *Server) Close() { s.stop() }

// FerretDB starts a server for the test on a directory of its own, stopped when the test ends.
// Its URI reaches it through a proxy that lets in one write command at a time (see
// OneWriteAtATime); Socket is FerretDB's own.
func FerretDB(t testing.TB) *Server {
	t.Helper()
	s, err := Start(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	path, stop, err := oneWriteAtATime(s.Socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop) // before s.Close, which waits for the proxy's connections to end
	s.URI, s.Writes = SocketURI(path), path
	return s
}

// writeCommands are the commands that write documents.
var writeCommands = map[string]bool{"insert": true, "update": true, "delete": true, "findAndModify": true}

// OneWriteAtATime serves a proxy to the FerretDB socket that forwards every command at once but
// a write command only while no other is in flight, and returns its mongodb:// URI and the
// function that stops it.
//
// FerretDB v1 does not make a write to one document atomic: its findAndModify and update read
// the document, change it in memory and write it back whole, outside any transaction that
// covers the read, so concurrent $set updates of one document lose one another's fields
// (store/storetest's concurrent updates lost one in about a third of the runs without -race).
// And its SQLite backend takes one write at a time while the others poll for the lock (no
// queue) for up to its busy_timeout of 10s, then fail with SQLITE_BUSY (32 concurrent writers
// met that in most runs under -race on 2 busy cores). MongoDB applies each write command to a
// document atomically and waits on its own locks. Letting one write command at a time reach
// FerretDB gives its clients that behaviour, and nothing more: two commands of one operation
// (a find, then a write of what was found) still interleave with others, as on MongoDB, so the
// tests still see a store that writes back what it read.
func OneWriteAtATime(socket string) (uri string, stop func(), err error) {
	path, stop, err := oneWriteAtATime(socket)
	if err != nil {
		return "", nil, err
	}
	return SocketURI(path), stop, nil
}

// oneWriteAtATime is OneWriteAtATime, which returns the path of the proxy's socket.
func oneWriteAtATime(socket string) (path string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "ferretdb-writes-")
	if err != nil {
		return "", nil, err
	}
	path = filepath.Join(dir, "mongodb.sock")
	stopProxy, err := OneWriteAtATimeOn(socket, path)
	if err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	return path, func() {
		stopProxy()
		os.RemoveAll(dir)
	}, nil
}

// OneWriteAtATimeOn serves OneWriteAtATime's proxy to socket on the unix socket path (replacing
// one left there by a process that was killed), and returns the function that stops it.
func OneWriteAtATimeOn(socket, path string) (stop func(), err error) {
	if err := removeSocket(path); err != nil {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	writing := make(chan struct{}, 1) // holds a token while a write command is in flight
	var (
		mu      sync.Mutex
		clients = map[net.Conn]bool{}
		wg      sync.WaitGroup
	)
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			clients[client] = true
			mu.Unlock()
			wg.Go(func() {
				relay(client, socket, writing)
				mu.Lock()
				delete(clients, client)
				mu.Unlock()
			})
		}
	})
	stop = func() {
		ln.Close()
		mu.Lock()
		for c := range clients {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}
	return stop, nil
}

// relay forwards the messages of one client connection to a connection of its own to socket,
// and the answers back, taking writing's token for each write command until its answer.
func relay(client net.Conn, socket string, writing chan struct{}) {
	defer client.Close()
	server, err := net.Dial("unix", socket)
	if err != nil {
		return
	}
	defer server.Close()
	var (
		mu      sync.Mutex
		holding bool  // the token, for the write command with the id pending
		pending int32 // the request id of that command
	)
	// release gives the token back if the answer to id has come, or whatever came if always.
	release := func(id int32, always bool) {
		mu.Lock()
		defer mu.Unlock()
		if holding && (always || id == pending) {
			holding = false
			<-writing
		}
	}
	answers := make(chan struct{})
	go func() {
		defer close(answers)
		defer client.Close() // so that the loop below ends too
		for {
			msg, err := ReadMessage(server)
			if err != nil {
				return
			}
			if _, err := client.Write(msg); err != nil {
				return
			}
			release(int32(binary.LittleEndian.Uint32(msg[8:])), false) // the id it responds to
		}
	}()
	for {
		msg, err := ReadMessage(client)
		if err != nil {
			break
		}
		if writeCommands[CommandName(msg)] {
			writing <- struct{}{}
			mu.Lock()
			holding, pending = true, int32(binary.LittleEndian.Uint32(msg[4:]))
			mu.Unlock()
		}
		if _, err := server.Write(msg); err != nil {
			break
		}
		if moreToCome(msg) { // an unacknowledged write: no answer will come
			release(0, true)
		}
	}
	server.Close()
	<-answers
	release(0, true)
}

// ReadMessage reads one MongoDB wire protocol message, for proxies of tests: a header of four
// little-endian int32 (length, request id, the id it responds to, opcode), then the rest of
// length.
func ReadMessage(r io.Reader) ([]byte, error) {
	header := make([]byte, 16)
	if _, err := io.ReadFull(r, header); err != nil {
		return nil, err
	}
	length := binary.LittleEndian.Uint32(header)
	if length < 16 || length > 48<<20 {
		return nil, fmt.Errorf("a message of %d bytes", length)
	}
	msg := append(header, make([]byte, length-16)...)
	_, err := io.ReadFull(r, msg[16:])
	return msg, err
}

// ServeTCP serves, for as long as the process runs, a proxy on a free loopback port to the
// server's socket, and returns its address (host:port). Each message a client sends is handed to
// pass with the client's connection, and goes on to the server only if pass returns true; the
// server's answers go back as they are.
func ServeTCP(socket string, pass func(client net.Conn, msg []byte) bool) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer client.Close()
				server, err := net.Dial("unix", socket)
				if err != nil {
					return
				}
				defer server.Close()
				go func() {
					// The server gone (a restart), its client's connection goes too, as the
					// server's own would: a command in flight fails at once, where it would wait
					// out its timeout for an answer that cannot come.
					_, _ = io.Copy(client, server)
					client.Close()
				}()
				for {
					msg, err := ReadMessage(client)
					if err != nil {
						return
					}
					if !pass(client, msg) {
						continue
					}
					if _, err := server.Write(msg); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// DelayCommands is a pass of ServeTCP that holds each command a random time in [least, most)
// before it goes on, and the other messages not at all: a database that is slow, not down (a
// loaded host, a restart warming up).
func DelayCommands(least, most time.Duration) func(client net.Conn, msg []byte) bool {
	return func(_ net.Conn, msg []byte) bool {
		if CommandName(msg) != "" {
			d := least
			if most > least {
				d += rand.N(most - least)
			}
			time.Sleep(d)
		}
		return true
	}
}

const opMsg = 2013

// CommandName is the command of an OP_MSG, or "" for another message: the first key of its body
// section, which follows the header (16 bytes), the flags (4), the section kind 0 (1), and the
// body's length (4) and first element type (1).
func CommandName(msg []byte) string {
	if len(msg) < 27 || binary.LittleEndian.Uint32(msg[12:]) != opMsg || msg[20] != 0 {
		return ""
	}
	name, _, ok := bytes.Cut(msg[26:], []byte{0})
	if !ok {
		return ""
	}
	return string(name)
}

// moreToCome reports whether an OP_MSG has the flag that says no answer follows.
func moreToCome(msg []byte) bool {
	return len(msg) >= 20 && binary.LittleEndian.Uint32(msg[12:]) == opMsg && binary.LittleEndian.Uint32(msg[16:])&2 != 0
}

// MongoDBURI is the URI of a real MongoDB to run the tests against as well, from the
// environment variable MONGODB_URI; empty when it is not set.
func MongoDBURI() string { return os.Getenv("MONGODB_URI") }
