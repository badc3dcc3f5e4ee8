// Command gqlbare is the gqlgen baseline of the posts benchmark: a gqlgen server, written the way
// gqlgen's documentation shows, that answers caddy-posts' post(id) and user(id){posts} queries
// from caddy-posts' own SQLite file.
//
//	gqlbare -db DIR/posts.db -addr 127.0.0.1:8080 [-pprof 127.0.0.1:8081]
//
// It serves POST and GET /graphql.
package main

//go:generate go run github.com/99designs/gqlgen generate

import (
	"errors"
	"flag"
	"log"
	"net/http"
	_ "net/http/pprof" // for -pprof
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/99designs/gqlgen/graphql/handler"
	"github.com/99designs/gqlgen/graphql/handler/extension"
	"github.com/99designs/gqlgen/graphql/handler/lru"
	"github.com/99designs/gqlgen/graphql/handler/transport"
	"github.com/vektah/gqlparser/v2/ast"

	"github.com/postsedge/caddy-posts/bench/gqlbare/graph"
	"github.com/postsedge/caddy-posts/bench/gqlbare/store"
)

func main() {
	log.SetFlags(0)
	db := flag.String("db", "posts.db", "caddy-posts' SQLite file (data_dir/posts.db), opened read-only")
	addr := flag.String("addr", "127.0.0.1:8080", "the HTTP address to listen on")
	profiles := flag.String("pprof", "", "if set, the address to serve net/http/pprof's /debug/pprof/ on (bench/run's -profile)")
	flag.Parse()
	if err := serve(*db, *addr, *profiles); err != nil {
		log.Fatal(err)
	}
}

// serve serves /graphql on addr until SIGINT or SIGTERM.
func serve(db, addr, profiles string) error {
	s, err := store.Open(db)
	if err != nil {
		return err
	}
	defer s.Close()

	// As gqlgen's server template (plugin/servergen) sets it up: its transports, its cache of
	// parsed and validated documents by their text, introspection, and automatic persisted
	// queries.
	srv := handler.New(graph.NewExecutableSchema(graph.Config{Resolvers: &graph.Resolver{Store: s}}))
	srv.AddTransport(transport.Options{})
	srv.AddTransport(transport.GET{})
	srv.AddTransport(transport.POST{})
	srv.SetQueryCache(lru.New[*ast.QueryDocument](1000))
	srv.Use(extension.Introspection{})
	srv.Use(extension.AutomaticPersistedQuery{Cache: lru.New[string](100)})

	mux := http.NewServeMux()
	mux.Handle("/graphql", srv)
	if profiles != "" {
		// On an address of its own: the server serves only what a user's would.
		go func() { log.Print(http.ListenAndServe(profiles, http.DefaultServeMux)) }()
	}
	server := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- server.ListenAndServe() }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	select {
	case err = <-done:
	case <-sig:
		err = server.Close()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}
