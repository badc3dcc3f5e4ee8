// Command pocketbase is the PocketBase peer of the posts benchmark: a PocketBase app with a
// `posts` collection shaped like ours, served over HTTP, and a fast seeder for it.
//
//	pocketbase serve -dir DIR -addr 127.0.0.1:8091 [-pprof 127.0.0.1:8092] [-dev]
//	pocketbase seed  -dir DIR -n 200000 -users 20 -ids ids.txt
//
// The endpoints the benchmark uses are PocketBase's own record API:
//
//	GET  /api/collections/posts/records/{id}
//	GET  /api/collections/posts/records?perPage=20&sort=-created,-id&skipTotal=1
//	POST /api/collections/posts/records   {"userId":"alice","title":"t","body":"b"}
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/http"
	_ "net/http/pprof" // for -pprof
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/pocketbase/dbx"
	"github.com/pocketbase/pocketbase/apis"
	"github.com/pocketbase/pocketbase/core"
	_ "github.com/pocketbase/pocketbase/migrations" // registers the system migrations
	"github.com/pocketbase/pocketbase/tools/types"
)

func main() {
	log.SetFlags(0)
	if len(os.Args) < 2 {
		log.Fatal("usage: pocketbase serve|seed [flags]")
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", "pb_data", "the data directory (data.db and auxiliary.db)")
	var err error
	switch os.Args[1] {
	case "serve":
		addr := fs.String("addr", "127.0.0.1:8090", "the HTTP address to listen on")
		profiles := fs.String("pprof", "", "if set, the address to serve net/http/pprof's /debug/pprof/ on (bench/run's -profile)")
		dev := fs.Bool("dev", false, "PocketBase's dev mode: print every SQL statement and log line")
		fs.Parse(os.Args[2:])
		if *profiles != "" {
			// On an address of its own: PocketBase's router serves only PocketBase.
			go func() { log.Print(http.ListenAndServe(*profiles, http.DefaultServeMux)) }()
		}
		err = serve(*dir, *addr, *dev)
	case "seed":
		n := fs.Int("n", 2000, "how many posts to insert")
		users := fs.Int("users", 20, "how many users (user0..userU-1) the posts go to, in turn")
		ids := fs.String("ids", "", "the file to write the new posts' ids to, one a line")
		fs.Parse(os.Args[2:])
		err = seed(*dir, *n, *users, *ids)
	default:
		err = fmt.Errorf("unknown command %q: want serve or seed", os.Args[1])
	}
	if err != nil {
		log.Fatal(err)
	}
}

// open bootstraps a PocketBase app in dir (running its system migrations) and makes sure it
// has the posts collection and quiet logs.
func open(dir string, dev bool) (*core.BaseApp, error) {
	app := core.NewBaseApp(core.BaseAppConfig{DataDir: dir, IsDev: dev})
	if err := app.Bootstrap(); err != nil {
		return nil, err
	}
	if err := ensureSchema(app); err != nil {
		return nil, errors.Join(err, app.ResetBootstrapState())
	}
	return app, nil
}

// ensureSchema creates the posts collection, with our indexes and public rules, unless it
// exists, and turns off the request log (logs kept for 0 days: PocketBase then writes no log
// rows to auxiliary.db at all).
func ensureSchema(app core.App) error {
	if s := app.Settings(); s.Logs.MaxDays != 0 {
		s.Logs.MaxDays = 0
		if err := app.Save(s); err != nil {
			return fmt.Errorf("settings: %w", err)
		}
	}
	if _, err := app.FindCollectionByNameOrId("posts"); err == nil {
		return nil
	}
	c := core.NewBaseCollection("posts")
	c.Fields.Add(
		&core.TextField{Name: "userId", Required: true, Max: 100},
		&core.TextField{Name: "title", Required: true, Max: 300},
		&core.TextField{Name: "body", Max: 50000},
		&core.AutodateField{Name: "created", OnCreate: true},
		&core.AutodateField{Name: "updated", OnCreate: true, OnUpdate: true},
	)
	c.AddIndex("idx_posts_created", false, "`created` DESC, `id` DESC", "")
	c.AddIndex("idx_posts_user_created", false, "`userId`, `created` DESC, `id` DESC", "")
	// list, view and create are open to anyone (no auth token); update and delete are
	// superusers' only.
	c.ListRule = types.Pointer("")
	c.ViewRule = types.Pointer("")
	c.CreateRule = types.Pointer("")
	if err := app.Save(c); err != nil {
		return fmt.Errorf("creating the posts collection: %w", err)
	}
	return nil
}

// serve runs PocketBase's HTTP server on addr until SIGINT or SIGTERM.
func serve(dir, addr string, dev bool) error {
	app, err := open(dir, dev)
	if err != nil {
		return err
	}
	// No installer (it would create a superuser and print a link to the admin UI).
	app.OnServe().BindFunc(func(e *core.ServeEvent) error {
		e.InstallerFunc = nil
		return e.Next()
	})
	done := make(chan error, 1)
	go func() { done <- apis.Serve(app, apis.ServeConfig{HttpAddr: addr}) }()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	stopped := false
	select {
	case err = <-done:
		stopped = true
	case <-sig:
	}
	// OnTerminate shuts the HTTP server down; then the databases are closed.
	stopErr := app.OnTerminate().Trigger(&core.TerminateEvent{App: app}, func(e *core.TerminateEvent) error {
		return e.App.ResetBootstrapState()
	})
	if !stopped {
		err = <-done
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return errors.Join(err, stopErr)
}

// seed inserts n posts straight into the posts table, in one transaction with one prepared
// statement, bypassing record hooks and validation (the values are valid by construction).
// Post i belongs to user{i%users} and is created one minute before post i-1, the first one at
// 2026-01-01 00:00 UTC, so newest first is insertion order. The ids go to idsFile in that
// order.
func seed(dir string, n, users int, idsFile string) error {
	if n < 0 || users < 1 {
		return fmt.Errorf("want -n >= 0 and -users >= 1")
	}
	app, err := open(dir, false)
	if err != nil {
		return err
	}
	defer app.ResetBootstrapState()

	var out *bufio.Writer
	if idsFile != "" {
		f, err := os.Create(idsFile)
		if err != nil {
			return err
		}
		defer f.Close()
		out = bufio.NewWriter(f)
	}

	began := time.Now()
	first := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	db := app.NonconcurrentDB().(*dbx.DB).DB()
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt, err := tx.Prepare("INSERT INTO posts (id, userId, title, body, created, updated) VALUES (?, ?, ?, ?, ?, ?)")
	if err != nil {
		return err
	}
	defer stmt.Close()
	for i := range n {
		id := core.GenerateDefaultRandomId()
		at := first.Add(-time.Duration(i) * time.Minute).Format(types.DefaultDateLayout)
		body := strings.Repeat("lorem ipsum ", 1+i%20)
		if _, err := stmt.Exec(id, fmt.Sprintf("user%d", i%users), fmt.Sprintf("post %d", i), body, at, at); err != nil {
			return fmt.Errorf("post %d: %w", i, err)
		}
		if out != nil {
			out.WriteString(id)
			out.WriteByte('\n')
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	took := time.Since(began)
	if out != nil {
		if err := out.Flush(); err != nil {
			return err
		}
	}
	log.Printf("seeded %d posts in %s (%.0f posts/s)", n, took.Round(time.Millisecond), float64(n)/took.Seconds())
	return nil
}
