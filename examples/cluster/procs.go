package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// startTimeout bounds how long a node process may take to serve.
const startTimeout = 30 * time.Second

// stopTimeout bounds a node's graceful shutdown; past it the node is killed.
const stopTimeout = 15 * time.Second

// A proc is a node process the parent started: this program again, with the hidden -node
// flag.
type proc struct {
	id     string
	cmd    *exec.Cmd
	stdin  io.Closer     // never written: the node stops if it closes (the parent is gone)
	ready  chan struct{} // closed when the node said "ready"
	exited chan struct{} // closed once the process is waited for
	err    error         // its exit status, set before exited closes
}

// startAttempts is how many times a node is started before the parent gives up: a node
// exits at once if its port is taken, which another process may do for a moment (the ports
// are picked from the range the system hands out).
const startAttempts = 5

// startNode starts node id of the config at path and waits until it serves, trying again
// a few times if the process exits before it serves.
func startNode(ctx context.Context, exe, path, id string) (*proc, error) {
	for attempt := 1; ; attempt++ {
		p, err := startNodeOnce(ctx, exe, path, id)
		if err == nil || !errors.Is(err, errExited) || attempt == startAttempts {
			return p, err
		}
		if pause(ctx, 200*time.Millisecond); ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

func startNodeOnce(ctx context.Context, exe, path, id string) (*proc, error) {
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
	p := &proc{id: id, cmd: cmd, stdin: stdin, ready: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if lines.Text() == "ready" {
				close(p.ready)
			}
		}
		p.err = cmd.Wait() // after its output is read to the end, as Wait asks
		close(p.exited)
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case <-p.ready:
		return p, nil
	case <-p.exited:
		stdin.Close()
		return nil, fmt.Errorf("%w: %s, before it served: %v", errExited, id, p.err)
	case <-timer.C:
		err = fmt.Errorf("%s did not serve within %v", id, startTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.kill()
	return nil, err
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// kill kills the process with SIGKILL (no deferred call, no Close: nothing runs) and waits
// for it to be gone.
func (p *proc) kill() {
	p.cmd.Process.Kill()
	<-p.exited
	p.stdin.Close()
}

// stop asks the process to shut down gracefully (SIGTERM) and waits for it; a process that
// takes longer than stopTimeout is killed. It returns the process's failure, if any.
func (p *proc) stop() error {
	defer p.stdin.Close()
	select {
	case <-p.exited:
		return fmt.Errorf("%s had exited: %v", p.id, p.err)
	default:
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		p.kill()
		return err
	}
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
