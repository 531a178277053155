package offsets_test

import (
	"bytes"
	"io/fs"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/offsets"
)

// watchFS wraps a file system and shows every write, with the bytes it replaces, to onWrite.
type watchFS struct {
	offsets.FS
	onWrite func(path string, old, data []byte)
}

type watchRoot struct {
	offsets.Root
	w    *watchFS
	path string
}

type watchFile struct {
	offsets.File
	w    *watchFS
	path string
}

func (w *watchFS) OpenRoot(dir string) (offsets.Root, error) {
	r, err := w.FS.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	return &watchRoot{Root: r, w: w, path: dir}, nil
}

func (r *watchRoot) OpenFile(name string, flag int, perm fs.FileMode) (offsets.File, error) {
	f, err := r.Root.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &watchFile{File: f, w: r.w, path: r.path + "/" + name}, nil
}

func (f *watchFile) WriteAt(p []byte, off int64) (int, error) {
	old := make([]byte, len(p))
	n, _ := f.File.ReadAt(old, off)
	f.w.onWrite(f.path, old[:n], p)
	return f.File.WriteAt(p, off)
}

// FullSync passes the optional capability through.
func (f *watchFile) FullSync() error { return f.File.(offsets.FullSyncer).FullSync() }

// Checklist item 63, invariant I10: Forget racing a running tick loop. Each incarnation of the
// shard has frontiers in its own range; once Forget returns, no write may carry a frontier of
// an incarnation before it (a prime rewriting the bytes already there is no snapshot and is
// not counted). Run with -race, this is also the data-race check between Forget and Tick.
func TestForgetRacesTicks(t *testing.T) {
	fsys := crashfs.New()
	require.NoError(t, fsys.MkdirAll(dirOf("t", 0)))
	var floor, stale, checked atomic.Int64
	w := &watchFS{FS: fsys, onWrite: func(path string, old, data []byte) {
		if bytes.Equal(old, data) {
			return
		}
		var v int64
		switch {
		case strings.HasSuffix(path, offsets.AheadFile) && len(data) == offsets.SlotSize:
			var r offsets.Record
			if offsets.DecodeSlot(data, &r) != nil {
				return
			}
			v = r.Frontier
		case strings.HasSuffix(path, offsets.OffsetFile):
			var ok bool
			if v, ok = offsets.OffsetFrontier(data, "t", 0); !ok {
				return
			}
		default:
			return
		}
		checked.Add(1)
		if v < floor.Load() {
			stale.Add(1)
		}
	}}
	shards := offsets.NewShards()
	c, err := offsets.New(offsets.Config{FS: w, Dir: dirOf, Source: shards, Interval: 100 * time.Millisecond})
	require.NoError(t, err)
	offsets.SetLevelInterval(c, 0)

	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		now := time.Unix(0, 0)
		for {
			select {
			case <-stop:
				return
			default:
			}
			now = now.Add(100 * time.Millisecond)
			_ = c.Tick(now)
		}
	}()
	const epochs = 150
	for e := range int64(epochs) {
		base := e * 1_000_000
		shards.Seed("t", 0, offsets.State{Found: true, Frontier: base})
		c.MarkDirty("t", 0)
		for burst := range int64(3) {
			written := c.Stats().Windows
			for i := range int64(20) {
				if shards.Ack("t", 0, base+1+burst*20+i) {
					c.MarkDirty("t", 0)
				}
			}
			for burst < 2 && c.Stats().Windows == written {
				runtime.Gosched() // let the tick loop write this incarnation's window
			}
		}
		shards.Drop("t", 0)
		c.Forget("t", 0)
		floor.Store((e + 1) * 1_000_000)
	}
	close(stop)
	<-done
	require.NoError(t, c.Close())
	require.Zero(t, stale.Load(), "writes of snapshots taken before a Forget")
	require.NotZero(t, checked.Load())
	t.Logf("%d writes checked", checked.Load())
}

// forgetOnState hands out a snapshot and then, before the tick can use it, drops the shard and
// forgets the partition: a drop that lands between a tick's snapshot and its write.
type forgetOnState struct {
	*offsets.Shards
	c   *offsets.Committer
	arm bool
}

func (s *forgetOnState) State(topic string, p int32, into *offsets.State) bool {
	ok := s.Shards.State(topic, p, into)
	if s.arm && ok {
		s.arm = false
		s.Shards.Drop(topic, p)
		s.c.Forget(topic, p)
	}
	return ok
}

// Checklist item 63: a snapshot taken before a Forget is never written after it returns, in the
// prime phase or the window phase.
func TestForgetAfterSnapshotWritesNothing(t *testing.T) {
	tests := []struct {
		name   string
		primed bool
	}{{"before the prime", false}, {"before the window", true}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := crashfs.New()
			require.NoError(t, fsys.MkdirAll(dirOf("t", 0)))
			src := &forgetOnState{Shards: offsets.NewShards()}
			c, err := offsets.New(offsets.Config{FS: fsys, Dir: dirOf, Source: src})
			require.NoError(t, err)
			src.c = c
			src.Seed("t", 0, offsets.State{Frontier: -1})
			now := time.Unix(0, 0)
			if tt.primed {
				src.Ack("t", 0, 0)
				c.MarkDirty("t", 0)
				now = now.Add(100 * time.Millisecond)
				require.NoError(t, c.Tick(now))
			}
			var writes []crashfs.Op
			fsys.Inject(func(op crashfs.Op) error {
				if op.Kind == crashfs.OpWrite || op.Kind == crashfs.OpCreate || op.Kind == crashfs.OpTruncate {
					writes = append(writes, op)
				}
				return nil
			})
			src.Ack("t", 0, 1)
			c.MarkDirty("t", 0)
			src.arm = true
			now = now.Add(100 * time.Millisecond)
			require.NoError(t, c.Tick(now))
			require.False(t, src.arm, "the drop happened")
			require.Empty(t, writes)
			require.NoError(t, c.Close())
			require.Empty(t, writes)
		})
	}
}
