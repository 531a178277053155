package main

import (
	"context"
	"errors"
	"time"

	"narad.dev/consume/examples/internal/launch"
	"narad.dev/consume/examples/internal/procs"
)

// startTimeout bounds how long a node process may take to serve.
const startTimeout = 30 * time.Second

// stopTimeout bounds a node's graceful shutdown; past it the node is killed.
const stopTimeout = 15 * time.Second

// A proc is a node process the parent started: this program again, with the hidden -node
// flag. Its input is never written: the node stops if it closes (the parent is gone).
type proc struct{ *procs.Proc }

// errExited says a node process exited when it was not asked to.
var errExited = procs.ErrExited

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
		if launch.Pause(ctx, 200*time.Millisecond); ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
}

func startNodeOnce(ctx context.Context, exe, path, id string) (*proc, error) {
	p, err := procs.Start(id, exe, []string{"-node", "-config", path, "-id", id}, nil)
	if err != nil {
		return nil, err
	}
	if err := p.WaitReady(ctx, startTimeout); err != nil {
		p.Kill()
		return nil, err
	}
	return &proc{p}, nil
}

// stop asks the process to shut down gracefully (SIGTERM) and waits for it; a process that
// takes longer than stopTimeout is killed. It returns the process's failure, if any.
func (p *proc) stop() error {
	defer p.CloseInput()
	if err := p.Terminate(); err != nil {
		if p.Alive() {
			p.Kill()
		}
		return err
	}
	return p.WaitExit(stopTimeout)
}
