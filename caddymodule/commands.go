package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/postsedge/caddy-posts/store/sqlite"
)

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "posts-backup",
		Usage: "--output <file> [--data_dir <dir>]",
		Short: "Writes a consistent copy of the embedded posts store, while Caddy serves it",
		Long: `
Copies the embedded store of caddy-posts (posts.db in the data_dir) to a new file, while
a running Caddy goes on reading and writing it: the copy is one snapshot (SQLite's VACUUM
INTO), checked with PRAGMA integrity_check before it is given its name.

To restore it: stop Caddy, delete posts.db-wal and posts.db-shm in the data_dir if they
are there, copy the backup to <data_dir>/posts.db, and start Caddy.

--data_dir defaults to the "posts" folder in Caddy's data directory, as the posts
directive's data_dir does.`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Flags().StringP("output", "o", "", "The file to write; it must not exist")
			cmd.Flags().String("data_dir", "", "The data_dir of the posts directive")
			cmd.RunE = caddycmd.WrapCommandFuncForCobra(backupCommand)
		},
	})
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "posts-import-ferretdb",
		Usage: "[--data_dir <dir>] [--database <name>]",
		Short: "Brings the posts of the FerretDB-based embedded store of earlier releases into the SQLite store",
		Long: `
Earlier releases of caddy-posts kept the embedded store in FerretDB's files
(<database>.sqlite) in the data_dir; this one keeps it in posts.db, and refuses to start
on a data_dir that still holds the old files. This command moves those files into
<data_dir>/ferretdb-v1/ and copies their posts and user profiles into posts.db, in one
transaction. Posts already in posts.db are left as they are, so it can run again.

Stop Caddy first. --data_dir defaults to the "posts" folder in Caddy's data directory;
--database to "posts", the database earlier releases used unless the config named another.`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.Flags().String("data_dir", "", "The data_dir of the posts directive")
			cmd.Flags().String("database", DefaultDatabase, "The database the earlier release used")
			cmd.RunE = caddycmd.WrapCommandFuncForCobra(importCommand)
		},
	})
}

// dataDirFlag is the --data_dir of a command, or the directive's default.
func dataDirFlag(fl caddycmd.Flags) string {
	if dir := fl.String("data_dir"); dir != "" {
		return dir
	}
	return filepath.Join(caddy.AppDataDir(), "posts")
}

// interrupted is a context that ends on Ctrl-C.
func interrupted() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt)
}

func backupCommand(fl caddycmd.Flags) (int, error) {
	output := fl.String("output")
	if output == "" {
		return caddy.ExitCodeFailedStartup, errors.New("--output is required: the file to write")
	}
	ctx, stop := interrupted()
	defer stop()
	dir := dataDirFlag(fl)
	posts, err := sqlite.Backup(ctx, dir, output)
	if err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("backing up %s: %w", dir, err)
	}
	fmt.Printf("wrote %s: %d posts, integrity check ok\n", output, posts)
	return caddy.ExitCodeSuccess, nil
}

func importCommand(fl caddycmd.Flags) (int, error) {
	ctx, stop := interrupted()
	defer stop()
	dir := dataDirFlag(fl)
	done, err := sqlite.ImportFerretDB(ctx, dir, fl.String("database"), sqlite.Options{})
	if err != nil {
		return caddy.ExitCodeFailedStartup, fmt.Errorf("importing into %s: %w", dir, err)
	}
	fmt.Printf("copied %d posts and %d user profiles into %s\nthe earlier store's files are in %s: delete them once you have checked the posts\n",
		done.Posts, done.Users, filepath.Join(dir, sqlite.DatabaseFile), done.Moved)
	return caddy.ExitCodeSuccess, nil
}
