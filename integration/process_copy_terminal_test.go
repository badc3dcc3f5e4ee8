//go:build integration && linux

// posts-copy's progress line, on a real terminal (a pseudo-terminal of Linux).
package integration

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// pseudoTerminal opens a pseudo-terminal and returns its two ends: what a program writes to
// the terminal end comes out of the other.
func pseudoTerminal(t *testing.T) (reader, terminal *os.File) {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	unlock, number := int32(0), uint32(0)
	for _, call := range []struct {
		op  uintptr
		arg unsafe.Pointer
	}{{syscall.TIOCSPTLCK, unsafe.Pointer(&unlock)}, {syscall.TIOCGPTN, unsafe.Pointer(&number)}} {
		if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, ptmx.Fd(), call.op, uintptr(call.arg)); errno != 0 {
			ptmx.Close()
			t.Fatalf("ioctl %#x: %v", call.op, errno)
		}
	}
	tty, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", number), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		ptmx.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { ptmx.Close(); tty.Close() })
	return ptmx, tty
}

func TestPostsCopyShowsProgressOnATerminalOnly(t *testing.T) {
	ownProcesses(t)
	source := t.TempDir()
	seedDataDir(t, source, copyPosts)
	reader, terminal := pseudoTerminal(t)
	var stdout bytes.Buffer
	cmd := caddyCommand(t, &stdout, "posts-copy", "--from", source, "--to", t.TempDir(), "--batch_size", "100")
	cmd.Stderr = terminal
	shown := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(reader) // ends with an error once the terminal end is closed
		shown <- string(b)
	}()
	err := cmd.Run()
	terminal.Close()
	onTerminal := <-shown
	if err != nil {
		t.Fatalf("posts-copy: %v\n%s\n%s", err, &stdout, onTerminal)
	}
	for _, want := range []string{"\rcopying posts: 100 read, 100 new\x1b[K", "\rcopying profiles: 4 read, 4 new\x1b[K", fmt.Sprintf(" of %d\x1b[K", copyPosts), "\r\x1b[K"} {
		if !strings.Contains(onTerminal, want) {
			t.Errorf("the terminal did not show %q:\n%q", want, onTerminal)
		}
	}
	if strings.ContainsAny(stdout.String(), "\r\x1b") || !strings.Contains(stdout.String(), "the target holds every post and profile of the source, unchanged\n") {
		t.Errorf("the output that is not a terminal:\n%q", &stdout)
	}
}
