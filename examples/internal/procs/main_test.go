package procs

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain runs the test binary as the tests' child when asked to (the os.Args[0] re-exec
// pattern), as the examples run their nodes.
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "-child" {
		os.Exit(child(os.Args[2]))
	}
	goleak.VerifyTestMain(m)
}

// child behaves as mode says, and returns its exit code.
func child(mode string) int {
	switch mode {
	case "serve": // ready; stop on SIGTERM or once the input closes
		term := make(chan os.Signal, 1)
		signal.Notify(term, syscall.SIGTERM)
		closed := make(chan struct{})
		go func() { io.Copy(io.Discard, os.Stdin); close(closed) }()
		fmt.Println("hello")
		fmt.Println("ready")
		fmt.Println("after")
		select {
		case <-term:
			fmt.Println("terminated")
		case <-closed:
		}
		return 0
	case "fail": // exits before it serves
		return 3
	case "hang": // never serves, ignores SIGTERM (and says so) and its input
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ignoring SIGTERM")
		time.Sleep(time.Minute)
	}
	return 2
}
