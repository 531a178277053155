//go:build unix

package offsets

import "golang.org/x/sys/unix"

// softNoFile is the soft RLIMIT_NOFILE of the process (0 when it cannot be read).
func softNoFile() uint64 {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		return 0
	}
	return uint64(rl.Cur)
}
