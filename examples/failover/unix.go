//go:build unix

package main

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// lockWait takes an exclusive flock on f, waiting up to d.
func lockWait(f *os.File, d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			return fmt.Errorf("flock %s: %w", f.Name(), err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// unlock lets go of the flock on f.
func unlock(f *os.File) { syscall.Flock(int(f.Fd()), syscall.LOCK_UN) }

// pause stops process pid (SIGSTOP) or continues it (SIGCONT): the zombie phase.
func pause(pid int, stop bool) error {
	if stop {
		return syscall.Kill(pid, syscall.SIGSTOP)
	}
	return syscall.Kill(pid, syscall.SIGCONT)
}
