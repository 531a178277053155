package router_test

import (
	"context"
	"io/fs"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
)

// stallingFS is crashfs whose state-file syncs hang, once stall is called, until release: a
// disk that stopped answering.
type stallingFS struct {
	*crashfs.FS
	mu       sync.Mutex
	stalled  bool
	released chan struct{}
	blocked  chan struct{} // closed by the first sync that hangs
}

func newStallingFS() *stallingFS {
	return &stallingFS{FS: crashfs.New(), released: make(chan struct{}), blocked: make(chan struct{})}
}

func (f *stallingFS) stall() {
	f.mu.Lock()
	f.stalled = true
	f.mu.Unlock()
}

func (f *stallingFS) release() { close(f.released) }

func (f *stallingFS) wait() {
	f.mu.Lock()
	stalled := f.stalled
	if stalled {
		select {
		case <-f.blocked:
		default:
			close(f.blocked)
		}
	}
	f.mu.Unlock()
	if stalled {
		<-f.released
	}
}

func (f *stallingFS) OpenRoot(dir string) (router.Root, error) {
	r, err := f.FS.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return stallingRoot{r, f}, nil
}

type stallingRoot struct {
	router.Root
	fs *stallingFS
}

func (r stallingRoot) OpenFile(name string, flag int, perm fs.FileMode) (router.File, error) {
	file, err := r.Root.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return stallingFile{file, r.fs}, nil
}

type stallingFile struct {
	router.File
	fs *stallingFS
}

func (f stallingFile) SyncData() error {
	f.fs.wait()
	return f.File.SyncData()
}

var _ router.FS = (*stallingFS)(nil)

// A Shutdown whose context ends while the final writeout hangs on the disk returns the
// context's error; the close goes on, and the Close after it waits for the close's end and
// returns its outcome: every ack persisted.
func TestShutdownBoundedByContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		h.close()
		slow := newStallingFS()
		h.fs = slow.FS // for the restart at the end
		h.cfg.FS = slow
		node, err := router.New(h.cfg)
		require.NoError(t, err)
		h.node = node
		h.produce(0, 3)
		for range 2 {
			require.NoError(t, h.ack(h.one()))
		}
		synctest.Wait()
		slow.stall()

		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		start := time.Now()
		err = node.Shutdown(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.Equal(t, time.Minute, time.Since(start), "Shutdown returned when its context ended")
		select {
		case <-slow.blocked:
		default:
			t.Fatal("the close never reached the stalled sync")
		}
		_, err = node.Consume(context.Background(), "orders", router.ConsumeOptions{})
		assert.ErrorIs(t, err, router.ErrClosed, "the close began: calls are turned away")

		// A second bounded wait gives up too, and leaves the outcome for the next caller.
		ended, cancelEnded := context.WithCancel(context.Background())
		cancelEnded()
		assert.ErrorIs(t, node.Shutdown(ended), context.Canceled)

		slow.release()
		require.NoError(t, node.Close(), "the close's outcome goes to the first call after the give-up")
		assert.ErrorIs(t, node.Close(), router.ErrClosed)
		assert.ErrorIs(t, node.Shutdown(context.Background()), router.ErrClosed)

		// Everything acked before the Shutdown was persisted.
		h.start()
		defer h.close()
		m := h.one()
		assert.Equal(t, int64(2), m.Offset, "acked records are not delivered again")
	})
}

// A Shutdown that finishes in time returns the close's outcome; every later call answers
// ErrClosed, as Close's always have.
func TestShutdownInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		h.produce(0, 1)
		require.NoError(t, h.ack(h.one()))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(t, h.node.Shutdown(ctx))
		assert.ErrorIs(t, h.node.Shutdown(ctx), router.ErrClosed)
		assert.ErrorIs(t, h.node.Close(), router.ErrClosed)
	})
}
