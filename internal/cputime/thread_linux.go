package cputime

import "syscall"

// Thread is the CPU time the calling thread has used so far, user and system, in ns; ok is
// false where a thread's own time cannot be read. A goroutine that reads it twice must stay
// on its thread in between (runtime.LockOSThread).
func Thread() (ns int64, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0, false
	}
	return ru.Utime.Nano() + ru.Stime.Nano(), true
}
