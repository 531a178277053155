package crashfs_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
)

// Damage changes the page cache and the durable image alike: neither a process crash nor a
// power cut undoes it.
func TestDamageSurvivesCrashes(t *testing.T) {
	for _, tt := range []struct {
		name string
		d    crashfs.Damage
		want []byte
	}{
		{"flip", crashfs.Damage{FlipBit: 9, TruncateTo: -1}, []byte{1, 0, 3, 4}},
		{"flip past the end", crashfs.Damage{FlipBit: 64, TruncateTo: -1}, []byte{1, 2, 3, 4}},
		{"truncate", crashfs.Damage{FlipBit: -1, TruncateTo: 2}, []byte{1, 2}},
		{"truncate past the end", crashfs.Damage{FlipBit: -1, TruncateTo: 9}, []byte{1, 2, 3, 4}},
		{"both", crashfs.Damage{FlipBit: 0, TruncateTo: 1}, []byte{0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := crashfs.New()
			require.NoError(t, f.MkdirAll("/d"))
			require.NoError(t, f.WriteFile("/d/x", []byte{1, 2, 3, 4}))
			require.NoError(t, f.Damage("/d/x", tt.d))
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
	require.Error(t, f.Damage("/d", crashfs.Damage{FlipBit: 0, TruncateTo: -1}), "a directory")
	require.Error(t, f.Damage("/d/missing", crashfs.Damage{FlipBit: 0, TruncateTo: -1}), "a missing file")
}
