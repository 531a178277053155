package procs

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// start starts the test binary as a child in mode, collecting its other lines.
func start(t *testing.T, mode string) (*Proc, func() []string) {
	p, lines, _ := startWaiting(t, mode, "")
	return p, lines
}

// startWaiting is start, with a channel closed once the child printed line.
func startWaiting(t *testing.T, mode, line string) (*Proc, func() []string, <-chan struct{}) {
	var mu sync.Mutex
	var lines []string
	printed := make(chan struct{})
	var once sync.Once
	p, err := Start("child-"+mode, os.Args[0], []string{"-child", mode}, func(s string) {
		mu.Lock()
		lines = append(lines, s)
		mu.Unlock()
		if s == line {
			once.Do(func() { close(printed) })
		}
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		if p.Alive() {
			p.Kill()
		}
	})
	return p, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), lines...) }, printed
}

func TestTerminate(t *testing.T) {
	p, lines := start(t, "serve")
	require.NoError(t, p.WaitReady(t.Context(), 10*time.Second))
	require.Equal(t, "child-serve", p.ID())
	require.Positive(t, p.Pid())
	require.True(t, p.Alive())
	require.NoError(t, p.Terminate())
	require.NoError(t, p.WaitExit(10*time.Second))
	require.False(t, p.Alive())
	require.Equal(t, []string{"hello", "after", "terminated"}, lines())
	require.ErrorContains(t, p.Terminate(), "had exited")
	p.CloseInput()
}

func TestCloseInput(t *testing.T) {
	p, lines := start(t, "serve")
	require.NoError(t, p.WaitReady(t.Context(), 10*time.Second))
	p.CloseInput()
	require.NoError(t, p.WaitExit(10*time.Second))
	require.NoError(t, p.Err())
	require.Equal(t, []string{"hello", "after"}, lines())
}

func TestExitedBeforeReady(t *testing.T) {
	p, _ := start(t, "fail")
	err := p.WaitReady(t.Context(), 10*time.Second)
	require.ErrorIs(t, err, ErrExited)
	<-p.Exited()
	require.Error(t, p.Err())
	require.ErrorContains(t, p.WaitExit(time.Second), "exit status 3")
	p.Kill() // harmless once it exited
}

func TestKill(t *testing.T) {
	p, _, ignoring := startWaiting(t, "hang", "ignoring SIGTERM")
	require.ErrorContains(t, p.WaitReady(t.Context(), 100*time.Millisecond), "did not serve within 100ms")
	// Only once the child ignores SIGTERM: on a busy machine the signal could otherwise come
	// first, and end the child as SIGTERM does by default.
	<-ignoring
	require.NoError(t, p.Terminate()) // ignored
	err := p.WaitExit(200 * time.Millisecond)
	require.ErrorContains(t, err, "did not stop within 200ms: killed")
	require.False(t, p.Alive())
}

func TestWaitReadyCanceled(t *testing.T) {
	p, _ := start(t, "hang")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	require.True(t, errors.Is(p.WaitReady(ctx, time.Minute), ctx.Err()))
	p.Kill()
}

// fakeMember is a process as KillAll and CheckAlive see it.
type fakeMember struct {
	alive, killed bool
}

func (f *fakeMember) Alive() bool { return f.alive }
func (f *fakeMember) Kill()       { f.killed, f.alive = true, false }
func (f *fakeMember) Err() error  { return errors.New("exit status 1") }

func TestKillAllCheckAlive(t *testing.T) {
	ps := map[string]*fakeMember{"node-1": {alive: true}, "node-2": {}}
	err := CheckAlive(ps, "")
	require.ErrorIs(t, err, ErrExited)
	require.ErrorContains(t, err, "node-2: exit status 1")
	require.NoError(t, CheckAlive(ps, "node-2"), "the one killed on purpose")
	KillAll(ps)
	require.True(t, ps["node-1"].killed)
	require.False(t, ps["node-2"].killed, "exited already")
}
