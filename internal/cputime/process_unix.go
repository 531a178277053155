//go:build unix

package cputime

import "syscall"

// Process is the CPU time the process has used so far, user and system, in ns; 0 where it
// cannot be read.
func Process() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
