package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"narad.dev/consume/examples/internal/procs"
)

// startTimeout bounds how long a node process may take to serve: its etcd member waits for
// a quorum of the others.
const startTimeout = 45 * time.Second

// stopTimeout bounds each step of a node's graceful shutdown; past it the node is killed.
const stopTimeout = 20 * time.Second

// A proc is a node process the parent started: this program again, with the hidden -node
// flag. Its input is never written: closing it lets the node stop its etcd member.
type proc struct {
	*procs.Proc
	closed chan struct{} // closed when the node said "closed" (its router.Node and server are)
}

// errExited says a node process exited when it was not asked to.
var errExited = procs.ErrExited

// startProc starts node id of the config at path; its "event ..." lines go to event. It
// does not wait for the node to serve (the etcd members of a new cluster wait for each
// other): waitReady does.
func startProc(exe, path, id string, event func(id, text string)) (*proc, error) {
	closed := make(chan struct{})
	p, err := procs.Start(id, exe, []string{"-node", "-config", path, "-id", id}, func(line string) {
		switch {
		case line == "closed":
			close(closed)
		case strings.HasPrefix(line, "event "):
			event(id, strings.TrimPrefix(line, "event "))
		}
	})
	if err != nil {
		return nil, err
	}
	return &proc{Proc: p, closed: closed}, nil
}

// waitReady waits until the node serves.
func (p *proc) waitReady() error { return p.WaitReady(context.Background(), startTimeout) }

// closeNode asks the process to shut down gracefully (SIGTERM) and waits until it has closed
// its node and server; its etcd member runs until finish.
func (p *proc) closeNode() error {
	if err := p.Terminate(); err != nil {
		return err
	}
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-p.closed:
		return nil
	case <-p.Exited():
		return fmt.Errorf("%s exited while closing: %v", p.ID(), p.Err())
	case <-timer.C:
		return fmt.Errorf("%s did not close within %v", p.ID(), stopTimeout)
	}
}

// finish closes the process's input (its etcd member stops) and waits for it to exit; one
// that takes longer than stopTimeout is killed.
func (p *proc) finish() error {
	p.CloseInput()
	return p.WaitExit(stopTimeout)
}
