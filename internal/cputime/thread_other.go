//go:build !linux

package cputime

// Thread reports that a thread's own CPU time cannot be read here.
func Thread() (ns int64, ok bool) { return 0, false }
