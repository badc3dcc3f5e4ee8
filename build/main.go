// Command build turns the xcaddy.json recipe (xcaddy's Builder in JSON) into a Caddy binary.
//
//	go run ./build -recipe xcaddy.json -o caddy
//
// Relative replacement paths in the recipe are taken from the recipe's folder.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/caddyserver/xcaddy"
)

func main() {
	recipe := flag.String("recipe", "xcaddy.json", "the build recipe")
	output := flag.String("o", "caddy", "the binary to write")
	flag.Parse()

	data, err := os.ReadFile(*recipe)
	if err != nil {
		log.Fatal(err)
	}
	var b xcaddy.Builder
	if err := json.Unmarshal(data, &b); err != nil {
		log.Fatalf("%s: %v", *recipe, err)
	}
	base, err := filepath.Abs(filepath.Dir(*recipe))
	if err != nil {
		log.Fatal(err)
	}
	for i, r := range b.Replacements {
		if p := string(r.New); strings.HasPrefix(p, ".") {
			b.Replacements[i].New = xcaddy.ReplacementPath(filepath.Join(base, p))
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := b.Build(ctx, *output); err != nil {
		log.Fatal(err)
	}
}
