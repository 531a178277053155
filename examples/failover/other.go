//go:build !unix

package main

import (
	"errors"
	"os"
	"time"
)

// errUnix: what the shared log's fence and the zombie phase need is unix's.
var errUnix = errors.New("the shared log's epoch fence (flock) and the zombie phase (SIGSTOP) need a unix system")

func lockWait(*os.File, time.Duration) error { return errUnix }

func unlock(*os.File) {}

func pause(int, bool) error { return errUnix }
