package crashfs_test

import (
	"io/fs"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
)

// FlipBit and Truncate change the page cache and the durable image alike: neither a process
// crash nor a power cut undoes them.
func TestDamageSurvivesCrashes(t *testing.T) {
	for _, tt := range []struct {
		name string
		d    func(f *crashfs.FS) error
		want []byte
	}{
		{"flip", func(f *crashfs.FS) error { return f.FlipBit("/d/x", 9) }, []byte{1, 0, 3, 4}},
		{"flip past the end", func(f *crashfs.FS) error { return f.FlipBit("/d/x", 64) }, []byte{1, 2, 3, 4}},
		{"truncate", func(f *crashfs.FS) error { return f.Truncate("/d/x", 2) }, []byte{1, 2}},
		{"truncate past the end", func(f *crashfs.FS) error { return f.Truncate("/d/x", 9) }, []byte{1, 2, 3, 4}},
		{"both", func(f *crashfs.FS) error {
			if err := f.FlipBit("/d/x", 0); err != nil {
				return err
			}
			return f.Truncate("/d/x", 1)
		}, []byte{0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := crashfs.New()
			require.NoError(t, f.MkdirAll("/d"))
			require.NoError(t, f.WriteFile("/d/x", []byte{1, 2, 3, 4}))
			require.NoError(t, tt.d(f))
			after := f
			for _, next := range []func(*crashfs.FS) *crashfs.FS{
				func(f *crashfs.FS) *crashfs.FS { return f },
				(*crashfs.FS).ProcessCrash,
				func(f *crashfs.FS) *crashfs.FS { return f.PowerCut(crashfs.PowerCut{}) },
			} {
				after = next(after)
				b, err := after.ReadFile("/d/x")
				require.NoError(t, err)
				require.Equal(t, tt.want, b)
			}
		})
	}
	f := crashfs.New()
	require.NoError(t, f.MkdirAll("/d"))
	require.NoError(t, f.WriteFile("/d/x", []byte{1}))
	require.ErrorIs(t, f.FlipBit("/d", 0), syscall.EISDIR, "a directory")
	require.ErrorIs(t, f.Truncate("/d", 0), syscall.EISDIR, "a directory")
	require.ErrorIs(t, f.FlipBit("/d/missing", 0), fs.ErrNotExist, "a missing file")
	require.ErrorIs(t, f.FlipBit("/d/x", -1), syscall.EINVAL, "a negative bit")
	require.ErrorIs(t, f.Truncate("/d/x", -1), syscall.EINVAL, "a negative size")
	b, err := f.ReadFile("/d/x")
	require.NoError(t, err)
	require.Equal(t, []byte{1}, b, "a refused damage changes nothing")
}
