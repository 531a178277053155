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
	var mu sync.Mutex
	var lines []string
	p, err := Start("child-"+mode, os.Args[0], []string{"-child", mode}, func(s string) {
		mu.Lock()
		lines = append(lines, s)
		mu.Unlock()
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		if p.Alive() {
			p.Kill()
		}
	})
	return p, func() []string { mu.Lock(); defer mu.Unlock(); return append([]string(nil), lines...) }
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
	p, _ := start(t, "hang")
	require.ErrorContains(t, p.WaitReady(t.Context(), 100*time.Millisecond), "did not serve within 100ms")
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
