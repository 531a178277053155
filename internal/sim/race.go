//go:build race

package sim

// Race reports whether the race detector is on: the tests run fewer seeds under it.
const Race = true
