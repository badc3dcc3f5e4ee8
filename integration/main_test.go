//go:build integration

// TestMain, and the schedule of the tests: a few processes' tests at a time.
package integration

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"testing"

	"github.com/postsedge/caddy-posts/openapi/openapitest"
)

// The tests of this package mostly wait: on a process that starts or is killed, on a storage or
// a server timeout. So a test that runs `caddy` processes of its own, on a data_dir and ports of
// their own, calls ownProcesses, and runs beside the others that do, a few at a time.
//
// A test that does not runs alone, before them: the ones of hostile_test.go, which measure the
// time and memory of their process.
var processSlots = make(chan struct{}, 3)

// ownProcesses makes t a parallel test that runs once one of processSlots is free.
func ownProcesses(t *testing.T) {
	t.Parallel()
	processSlots <- struct{}{}
	t.Cleanup(func() { <-processSlots })
}

// waitingTests is the -parallel of this package when none is given. A parallel test counts
// against -parallel while it waits for its turn in ownProcesses, which holds the real limit, so
// the default of GOMAXPROCS (2 on the machines that run make test) would leave a slot empty.
const waitingTests = 64

func TestMain(m *testing.M) {
	flag.Parse()
	parallelGiven := false
	flag.Visit(func(f *flag.Flag) { parallelGiven = parallelGiven || f.Name == "test.parallel" })
	if !parallelGiven {
		flag.Set("test.parallel", strconv.Itoa(waitingTests))
	}
	var violations openapitest.Violations
	http.DefaultTransport = openapitest.Checked{Base: http.DefaultTransport, Report: violations.Report}
	code := m.Run()
	for _, v := range violations.Found() {
		fmt.Fprintln(os.Stderr, "FAIL:", v)
		code = 1
	}
	os.Exit(code)
}
