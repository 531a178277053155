//go:build !linux && !darwin

package offsets

import "os"

// SyncData falls back to f.Sync (fsync or its platform equivalent) where no data-only sync is
// wired up.
func (f *osFile) SyncData() error { return f.f.Sync() }

func syncDir(d *os.File) error { return d.Sync() }
