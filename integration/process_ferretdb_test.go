//go:build integration

// A standalone FerretDB process for the tests that run several caddy processes on one database,
// or stop the database under one: startFerretProcess.
package integration

import (
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"

	"github.com/postsedge/caddy-posts/store/mongo/mongotest"
)

// This test binary, started with childEnv=ferretdb, serves FerretDB (on its SQLite backend, in
// the directory ferretDirEnv names) behind mongotest's one-write-at-a-time proxy on the unix
// socket ferretSocketEnv names, both in the one process: so that several caddy processes can
// write at once (FerretDB's SQLite backend would fail some with SQLITE_BUSY), and a SIGKILL
// takes the whole database away, as a crashed mongod does.
const (
	ferretDirEnv    = "CADDY_POSTS_TEST_FERRETDB_DIR"
	ferretSocketEnv = "CADDY_POSTS_TEST_FERRETDB_SOCKET"
)

func init() {
	if os.Getenv(childEnv) == "ferretdb" {
		if err := serveFerretDB(os.Getenv(ferretDirEnv), os.Getenv(ferretSocketEnv)); err != nil {
			fmt.Fprintln(os.Stderr, "ferretdb:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// serveFerretDB serves FerretDB on dir behind the proxy on socket until SIGINT or SIGTERM.
func serveFerretDB(dir, socket string) error {
	server, err := mongotest.StartOn(dir, socket+".ferretdb")
	if err != nil {
		return err
	}
	defer server.Close()
	stopProxy, err := mongotest.OneWriteAtATimeOn(server.Socket, socket)
	if err != nil {
		return err
	}
	defer stopProxy()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	<-signals
	return nil
}

// ferretProcess is a FerretDB process of the test (see serveFerretDB): its files and its socket
// outlive the process, so that stop and start are a database going down and coming back.
type ferretProcess struct {
	t *testing.T
	// URI is the database's mongodb:// URI, the same across stop and start.
	URI    string
	dir    string // FerretDB's files
	socket string
	cmd    *exec.Cmd
	done   chan struct{}
	out    *lockedBuffer
}

// startFerretProcess starts a FerretDB process on a new directory, and kills it when the test
// ends.
func startFerretProcess(t *testing.T) *ferretProcess {
	t.Helper()
	// A unix socket's path is short (104 bytes on some systems): not under t.TempDir.
	sockDir, err := os.MkdirTemp("", "ferret-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	socket := filepath.Join(sockDir, "mongodb.sock")
	f := &ferretProcess{t: t, URI: mongotest.SocketURI(socket), dir: t.TempDir(), socket: socket, out: &lockedBuffer{}}
	t.Cleanup(func() {
		if f.cmd != nil {
			f.stop()
		}
	})
	f.start()
	return f
}

// start starts the process again on the same directory and socket, and returns once the
// database answers a command there (at that moment, as near as 5ms).
func (f *ferretProcess) start() {
	f.t.Helper()
	if f.cmd != nil {
		f.t.Fatal("the FerretDB process runs already")
	}
	f.cmd = exec.Command(testBinary)
	f.cmd.Env = append(os.Environ(), childEnv+"=ferretdb", ferretDirEnv+"="+f.dir, ferretSocketEnv+"="+f.socket)
	f.cmd.Stdout, f.cmd.Stderr = f.out, f.out
	if err := f.cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) {
		cmd.Wait()
		close(done)
	}(f.cmd, f.done)
	for deadline := time.Now().Add(20 * time.Second); !f.answers(); time.Sleep(5 * time.Millisecond) {
		select {
		case <-f.done:
			f.t.Fatalf("the FerretDB process exited before serving:\n%s", f.out)
		default:
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("the FerretDB process did not serve in 20s:\n%s", f.out)
		}
	}
}

// stop kills the process (SIGKILL, as a crash would) and waits for it to end.
func (f *ferretProcess) stop() {
	f.t.Helper()
	if f.cmd == nil {
		f.t.Fatal("the FerretDB process is not running")
	}
	f.cmd.Process.Signal(syscall.SIGKILL)
	<-f.done
	f.cmd = nil
}

// signal sends sig to the process: SIGSTOP and SIGCONT make a database that stalls, every
// connection open and nothing answered, and goes on.
func (f *ferretProcess) signal(sig syscall.Signal) {
	f.t.Helper()
	if err := f.cmd.Process.Signal(sig); err != nil {
		f.t.Fatal(err)
	}
}

// hello is an OP_MSG of the command {hello: 1} to the admin database.
var hello = func() []byte {
	body, err := bson.Marshal(bson.D{{Key: "hello", Value: 1}, {Key: "$db", Value: "admin"}})
	if err != nil {
		panic(err)
	}
	msg := make([]byte, 21, 21+len(body))
	binary.LittleEndian.PutUint32(msg[4:], 1)     // request id
	binary.LittleEndian.PutUint32(msg[12:], 2013) // OP_MSG; flags 0, section kind 0
	msg = append(msg, body...)
	binary.LittleEndian.PutUint32(msg, uint32(len(msg)))
	return msg
}()

// answers says whether the database answers a command on its socket: through the proxy, so
// both are up. On the wire, not through a driver, whose own checks would add their delay.
func (f *ferretProcess) answers() bool {
	conn, err := net.DialTimeout("unix", f.socket, time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write(hello); err != nil {
		return false
	}
	_, err = mongotest.ReadMessage(conn)
	return err == nil
}
