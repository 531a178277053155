package statedir

import (
	"os"

	"golang.org/x/sys/unix"
)

// syncTree makes the file system holding dir durable with one syncfs(2).
func syncTree(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Syncfs(int(f.Fd()))
}
