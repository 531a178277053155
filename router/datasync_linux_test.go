package router_test

import (
	"os"

	"golang.org/x/sys/unix"
)

// dataSync is the data sync the committer uses on Linux: fdatasync.
func dataSync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
