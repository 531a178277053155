package filequeue

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"narad.dev/consume/router"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A queue opened over a directory delivers what was appended, and refuses to be taken for
// empty once it holds records; opened again, it keeps them.
func TestOpen(t *testing.T) {
	dir := t.TempDir()
	q, err := Open(dir, "t", 2, router.Config{})
	require.NoError(t, err)
	require.NoError(t, q.RequireEmpty("records"))
	_, err = q.Store.Append("t", 1, []byte("k"), []byte("v"))
	require.NoError(t, err)
	msgs, err := q.Node.Consume(context.Background(), "t", router.ConsumeOptions{Wait: time.Second})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.NoError(t, q.Node.Ack(context.Background(), "t", msgs[0].Receipt))
	require.NoError(t, q.Close())

	q, err = Open(dir, "t", 2, router.Config{})
	require.NoError(t, err)
	defer q.Close()
	require.ErrorContains(t, q.RequireEmpty("records"), "earlier run's records")
}

func TestStateDir(t *testing.T) {
	path, cleanup, err := StateDir("", "filequeue-")
	require.NoError(t, err)
	require.DirExists(t, path)
	cleanup()
	require.NoDirExists(t, path)
	require.Equal(t, "a temporary directory, removed at the end", StateNote(""))
	kept := t.TempDir() + "/kept"
	path, cleanup, err = StateDir(kept, "x")
	require.NoError(t, err)
	cleanup()
	require.DirExists(t, path)
	require.Equal(t, "kept", StateNote(kept))
}
