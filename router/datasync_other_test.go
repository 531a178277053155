//go:build !linux

package router_test

import "os"

// dataSync syncs f's data: fsync where there is no fdatasync.
func dataSync(f *os.File) error { return f.Sync() }
