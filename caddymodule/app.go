package caddymodule

import (
	"fmt"

	"github.com/caddyserver/caddy/v2"

	"github.com/postsedge/caddy-posts/store/sqlite"
)

func init() {
	caddy.RegisterModule(App{})
}

// AppName is the ID of the app that opens the embedded stores.
const AppName = "posts"

// App opens the embedded stores of a config when Caddy starts the config, not when it is
// provisioned: `caddy validate` provisions too, and must open nothing, so it can run beside a
// live server. A store that cannot open (its data_dir locked by another process, a database
// from a newer build) fails the start, so `caddy run` exits with the reason and a reload keeps
// the running config. Users never configure it: the posts handler loads it.
type App struct {
	stores []embeddedStore
	sites  map[string]int // the handlers of this config by the hub they would share (hubs.go)
	starts []func()       // of the background work that must not run under `caddy validate`
}

// embeddedStore is a store a handler of this config uses, and the settings it wants it to
// have: synchronous, post_cache_size.
type embeddedStore struct {
	store     *sqlite.Store
	fullSync  bool
	cacheSize int64
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  AppName,
		New: func() caddy.Module { return new(App) },
	}
}

// open asks for s.store to be opened when the config starts. Every site of one config that uses
// a data_dir must want the same settings.
func (a *App) open(s embeddedStore) error {
	for _, e := range a.stores {
		switch {
		case e.store != s.store:
		case e.fullSync != s.fullSync:
			return fmt.Errorf("data_dir %s: the sites that use it set different synchronous values", s.store.Dir())
		case e.cacheSize != s.cacheSize:
			return fmt.Errorf("data_dir %s: the sites that use it set different post_cache_size values", s.store.Dir())
		default:
			return nil
		}
	}
	a.stores = append(a.stores, s)
	return nil
}

// onStart has start called when the config starts (a start of work that runs already does
// nothing).
func (a *App) onStart(start func()) { a.starts = append(a.starts, start) }

// Start opens the stores (a store shared with the running config is open already) and applies
// this config's settings of them, so a reload changes them; then it starts the background work that
// reads them (what onStart was given: each store's follower).
func (a *App) Start() error {
	for _, e := range a.stores {
		if err := e.store.Open(); err != nil {
			return err
		}
	}
	if err := a.apply(); err != nil {
		return err
	}
	for _, start := range a.starts {
		start()
	}
	return nil
}

// apply gives the stores this config's settings.
func (a *App) apply() error {
	for _, e := range a.stores {
		if err := e.store.SetFullSync(e.fullSync); err != nil {
			return fmt.Errorf("embedded store: %w", err)
		}
		e.store.SetCacheSize(e.cacheSize)
	}
	return nil
}

// Stop gives the stores back the running config's settings: when this config is refused after
// Start (another app failed to start), the stores it shares with the running config must not
// keep its settings. The stores themselves close when the last config using them is cleaned
// up.
func (a *App) Stop() error {
	running, err := caddy.ActiveContext().AppIfConfigured(AppName)
	if err != nil || running == a {
		return nil
	}
	return running.(*App).apply()
}

// Interface guards
var (
	_ caddy.App = (*App)(nil)
)
