package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// startTimeout bounds how long a node process may take to serve: its etcd member waits for
// a quorum of the others.
const startTimeout = 45 * time.Second

// stopTimeout bounds each step of a node's graceful shutdown; past it the node is killed.
const stopTimeout = 20 * time.Second

// A proc is a node process the parent started: this program again, with the hidden -node
// flag.
type proc struct {
	id     string
	cmd    *exec.Cmd
	stdin  io.Closer     // never written: closing it lets the node stop its etcd member
	ready  chan struct{} // closed when the node said "ready"
	closed chan struct{} // closed when the node said "closed" (its router.Node and server are)
	exited chan struct{} // closed once the process is waited for
	err    error         // its exit status, set before exited closes
}

// startProc starts node id of the config at path; its "event ..." lines go to event. It
// does not wait for the node to serve (the etcd members of a new cluster wait for each
// other): waitReady does.
func startProc(exe, path, id string, event func(id, text string)) (*proc, error) {
	cmd := exec.Command(exe, "-node", "-config", path, "-id", id)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		stdin.Close()
		return nil, err
	}
	p := &proc{id: id, cmd: cmd, stdin: stdin, ready: make(chan struct{}), closed: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			switch line := lines.Text(); {
			case line == "ready":
				close(p.ready)
			case line == "closed":
				close(p.closed)
			case strings.HasPrefix(line, "event "):
				event(id, strings.TrimPrefix(line, "event "))
			}
		}
		p.err = cmd.Wait() // after its output is read to the end, as Wait asks
		close(p.exited)
	}()
	return p, nil
}

// waitReady waits until the node serves.
func (p *proc) waitReady() error {
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case <-p.ready:
		return nil
	case <-p.exited:
		return fmt.Errorf("%w: %s, before it served: %v", errExited, p.id, p.err)
	case <-timer.C:
		return fmt.Errorf("%s did not serve within %v", p.id, startTimeout)
	}
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// kill kills the process with SIGKILL (no deferred call, no Close: nothing runs) and waits
// for it to be gone.
func (p *proc) kill() {
	p.cmd.Process.Kill()
	<-p.exited
	p.stdin.Close()
}

// closeNode asks the process to shut down gracefully (SIGTERM) and waits until it has closed
// its node and server; its etcd member runs until finish.
func (p *proc) closeNode() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s had exited: %v", p.id, p.err)
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-p.closed:
		return nil
	case <-p.exited:
		return fmt.Errorf("%s exited while closing: %v", p.id, p.err)
	case <-timer.C:
		return fmt.Errorf("%s did not close within %v", p.id, stopTimeout)
	}
}

// finish closes the process's input (its etcd member stops) and waits for it to exit; one
// that takes longer than stopTimeout is killed.
func (p *proc) finish() error {
	p.stdin.Close()
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-p.exited:
		if p.err != nil {
			return fmt.Errorf("%s: %w", p.id, p.err)
		}
		return nil
	case <-timer.C:
		p.kill()
		return fmt.Errorf("%s did not stop within %v: killed", p.id, stopTimeout)
	}
}

// alive reports whether the process is still running.
func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// errExited says a node process exited when it was not asked to.
var errExited = errors.New("a node process exited")
