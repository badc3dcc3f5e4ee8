package mongotest

import (
	"bytes"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Fault is what a FaultProxy does to the next command of a kind, once.
type Fault struct {
	// Command and Collection select the command: its name ("insert", "findAndModify",
	// "update", "delete", "find") and the collection it names.
	Command, Collection string
	// Executed lets the command reach the server and be carried out, then drops the
	// connection before its answer: the client cannot tell whether it was. Otherwise the
	// connection drops before the command is sent, and nothing is carried out.
	Executed bool
	// Delay, instead, holds the command back that long before it is sent: a server that stalls.
	Delay time.Duration
}

// FaultProxy forwards a unix socket to a server's, and applies the faults a test arms to the
// commands that pass: the writes of a store can be cut at each of their steps.
type FaultProxy struct {
	// URI is the proxy's mongodb:// URI.
	URI string

	mu     sync.Mutex
	faults []Fault
	hits   map[Fault]int
}

// NewFaultProxy serves a proxy to the server's socket for the test; it stops when the test ends.
func NewFaultProxy(t testing.TB, socket string) *FaultProxy {
	t.Helper()
	dir, err := os.MkdirTemp("", "ferretdb-faults-")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "mongodb.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	p := &FaultProxy{URI: SocketURI(path), hits: map[Fault]int{}}
	var (
		wg    sync.WaitGroup
		conns sync.Map
	)
	t.Cleanup(func() {
		ln.Close()
		conns.Range(func(c, _ any) bool { c.(net.Conn).Close(); return true })
		wg.Wait()
		os.RemoveAll(dir)
	})
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("unix", socket)
			if err != nil {
				client.Close()
				continue
			}
			conns.Store(client, true)
			conns.Store(server, true)
			wg.Go(func() {
				p.relay(client, server)
				conns.Delete(client)
				conns.Delete(server)
			})
		}
	})
	return p
}

// Arm has f applied to the next command it selects.
func (p *FaultProxy) Arm(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = append(p.faults, f)
}

// Disarm drops the faults armed and not applied yet.
func (p *FaultProxy) Disarm() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.faults = nil
}

// Armed says how many faults wait for their command.
func (p *FaultProxy) Armed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.faults)
}

// Hits says how many times f was applied.
func (p *FaultProxy) Hits(f Fault) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.hits[f]
}

// take removes and returns the fault armed for msg, if any.
func (p *FaultProxy) take(msg []byte) (Fault, bool) {
	name, coll := CommandName(msg), commandCollection(msg)
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, f := range p.faults {
		if f.Command == name && f.Collection == coll {
			p.faults = append(p.faults[:i], p.faults[i+1:]...)
			p.hits[f]++
			return f, true
		}
	}
	return Fault{}, false
}

// relay forwards the messages of one connection both ways, applying the faults.
func (p *FaultProxy) relay(client, server net.Conn) {
	defer client.Close()
	defer server.Close()
	var (
		mu   sync.Mutex
		drop = map[int32]bool{} // the request ids whose answers end the connection
	)
	go func() {
		defer client.Close()
		for {
			msg, err := ReadMessage(server)
			if err != nil {
				return
			}
			mu.Lock()
			cut := drop[int32(binary.LittleEndian.Uint32(msg[8:]))]
			mu.Unlock()
			if cut {
				return // the command was carried out; its answer is lost
			}
			if _, err := client.Write(msg); err != nil {
				return
			}
		}
	}()
	for {
		msg, err := ReadMessage(client)
		if err != nil {
			return
		}
		if f, ok := p.take(msg); ok {
			switch {
			case f.Delay > 0:
				time.Sleep(f.Delay)
			case !f.Executed:
				return
			default:
				mu.Lock()
				drop[int32(binary.LittleEndian.Uint32(msg[4:]))] = true
				mu.Unlock()
			}
		}
		if _, err := server.Write(msg); err != nil {
			return
		}
	}
}

// commandCollection is the collection an OP_MSG's command names: the string value of the first
// element of its body (see CommandName), or "".
func commandCollection(msg []byte) string {
	name := CommandName(msg)
	if name == "" || msg[25] != 0x02 { // not a string
		return ""
	}
	at := 26 + len(name) + 1
	if len(msg) < at+4 {
		return ""
	}
	n := int(binary.LittleEndian.Uint32(msg[at:]))
	if n < 1 || len(msg) < at+4+n {
		return ""
	}
	value, _, _ := bytes.Cut(msg[at+4:at+4+n], []byte{0})
	return string(value)
}
