package procs

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

// ErrExited says a child process exited when it was not asked to.
var ErrExited = errors.New("a node process exited")

// A Proc is a child process.
type Proc struct {
	id     string
	cmd    *exec.Cmd
	stdin  io.Closer     // never written
	ready  chan struct{} // closed when the child said "ready"
	exited chan struct{} // closed once the process is waited for
	err    error         // its exit status, set before exited closes
}

// Start starts exe with args, as the child named id. Each line of its standard output
// other than "ready" is passed to line, if not nil (from another goroutine, in order). It
// does not wait for the child to serve: WaitReady does.
func Start(id, exe string, args []string, line func(string)) (*Proc, error) {
	cmd := exec.Command(exe, args...)
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
	p := &Proc{id: id, cmd: cmd, stdin: stdin, ready: make(chan struct{}), exited: make(chan struct{})}
	go func() {
		lines := bufio.NewScanner(stdout)
		readied := false
		for lines.Scan() {
			switch text := lines.Text(); {
			case text == "ready" && !readied:
				readied = true
				close(p.ready)
			case line != nil:
				line(text)
			}
		}
		p.err = cmd.Wait() // after its output is read to the end, as Wait asks
		close(p.exited)
	}()
	return p, nil
}

// ID is the child's name.
func (p *Proc) ID() string { return p.id }

// Pid is the child's process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Exited is closed once the child has exited and was waited for.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Err is the child's exit status, once Exited is closed.
func (p *Proc) Err() error { return p.err }

// Alive reports whether the child is still running.
func (p *Proc) Alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// WaitReady waits until the child says "ready", for up to timeout. A child that exits
// first is an ErrExited.
func (p *Proc) WaitReady(ctx context.Context, timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.ready:
		return nil
	case <-p.exited:
		return fmt.Errorf("%w: %s, before it served: %v", ErrExited, p.id, p.err)
	case <-timer.C:
		return fmt.Errorf("%s did not serve within %v", p.id, timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Kill kills the child with SIGKILL (no deferred call, no Close: nothing runs), waits for
// it to be gone, and closes its input.
func (p *Proc) Kill() {
	p.cmd.Process.Kill()
	<-p.exited
	p.stdin.Close()
}

// Terminate asks the child to shut down gracefully (SIGTERM). A child that had exited is
// an error.
func (p *Proc) Terminate() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s had exited: %v", p.id, p.err)
	default:
	}
	return p.cmd.Process.Signal(syscall.SIGTERM)
}

// CloseInput closes the child's standard input.
func (p *Proc) CloseInput() { p.stdin.Close() }

// WaitExit waits for the child to exit, and returns its failure, if any; a child that
// takes longer than timeout is killed.
func (p *Proc) WaitExit(timeout time.Duration) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-p.exited:
		if p.err != nil {
			return fmt.Errorf("%s: %w", p.id, p.err)
		}
		return nil
	case <-timer.C:
		p.Kill()
		return fmt.Errorf("%s did not stop within %v: killed", p.id, timeout)
	}
}

// A Member is a node process as an example holds it: a *Proc, or its own type around one.
type Member interface {
	Alive() bool
	Kill()
	Err() error
}

// KillAll kills every process of ps still running.
func KillAll[P Member](ps map[string]P) {
	for _, p := range ps {
		if p.Alive() {
			p.Kill()
		}
	}
}

// CheckAlive returns an error wrapping ErrExited that names a process of ps, other than
// except, that has exited; nil if every one runs.
func CheckAlive[P Member](ps map[string]P, except string) error {
	for id, p := range ps {
		if id != except && !p.Alive() {
			return fmt.Errorf("%w: %s: %v", ErrExited, id, p.Err())
		}
	}
	return nil
}
