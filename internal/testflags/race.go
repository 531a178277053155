//go:build race

package testflags

// Race reports whether the race detector is on.
const Race = true
