package caddymodule

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/postsedge/caddy-posts/store"
)

// copySummary is what posts-copy prints once the copy and the comparison are done.
func copySummary(from, to copySide, done store.Copied) string {
	var b strings.Builder
	fmt.Fprintf(&b, "copied %s to %s\n", from, to)
	for _, kind := range []struct {
		name string
		c    store.Comparison
	}{{"posts", done.Posts}, {"profiles", done.Users}} {
		c := kind.c
		fmt.Fprintf(&b, "%s: %d in the source, %d on the target; %d copied now, %d there already\n",
			kind.name, c.Source, c.Target, c.Inserted, c.Copied-c.Inserted)
		fmt.Fprintf(&b, "%s: sha256 of the ids %s in the source, %s on the target\n", kind.name, c.SourceSum, c.TargetSum)
	}
	if done.OK() {
		b.WriteString("the target holds every post and profile of the source, unchanged")
		if done.Posts.Extra+done.Users.Extra > 0 {
			fmt.Fprintf(&b, ", and %d posts and %d profiles of its own", done.Posts.Extra, done.Users.Extra)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// differences is the failure of a copy whose comparison found the stores differ.
func differences(done store.Copied) error {
	var errs []error
	for _, kind := range []struct {
		name string
		c    store.Comparison
	}{{"posts", done.Posts}, {"profiles", done.Users}} {
		if c := kind.c; c.Missing > 0 {
			errs = append(errs, fmt.Errorf("%d %s of the source are not on the target (%s): were they written during the copy? run it again",
				c.Missing, kind.name, strings.Join(c.MissingIDs, ", ")))
		}
		if c := kind.c; c.Differing > 0 {
			errs = append(errs, fmt.Errorf("%d %s are on the target with other content than in the source, and were left as they are (%s)",
				c.Differing, kind.name, strings.Join(c.DifferingIDs, ", ")))
		}
	}
	return fmt.Errorf("the target differs from the source: %w", errors.Join(errs...))
}

// progressLine shows where a copy is on one line of a terminal, rewritten in place at most ten
// times a second; on anything else it shows nothing.
type progressLine struct {
	w           io.Writer // nil when not a terminal
	stage       string
	stageStart  time.Time
	shown       time.Time
	sourcePosts int // known once the posts are copied, for the comparison's share
}

func newProgressLine(f *os.File) *progressLine {
	if fi, err := f.Stat(); err != nil || fi.Mode()&os.ModeCharDevice == 0 {
		return &progressLine{}
	}
	return &progressLine{w: f}
}

func (p *progressLine) show(c store.CopyProgress) {
	if p.w == nil {
		return
	}
	if c.Stage == "copying posts" {
		p.sourcePosts = c.Done
	}
	now := time.Now()
	if c.Stage != p.stage {
		p.stage, p.stageStart = c.Stage, now
	} else if now.Sub(p.shown) < 100*time.Millisecond {
		return
	}
	p.shown = now
	line := fmt.Sprintf("%s: %d", c.Stage, c.Done)
	switch {
	case strings.HasPrefix(c.Stage, "copying"):
		line += fmt.Sprintf(" read, %d new", c.Inserted)
	case c.Stage == "comparing posts":
		line += fmt.Sprintf(" of %d", p.sourcePosts)
	}
	if elapsed := now.Sub(p.stageStart).Seconds(); elapsed > 0.5 {
		line += fmt.Sprintf(" (%.0f/s)", float64(c.Done)/elapsed)
	}
	fmt.Fprintf(p.w, "\r%s\x1b[K", line) // back to the line's start, the line, then clear what is left of the last one
}

// end clears the line, so that what follows starts on an empty one.
func (p *progressLine) end() {
	if p.w != nil && !p.shown.IsZero() {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}
