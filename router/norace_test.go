//go:build !race

package router_test

// raceDetector reports whether the race detector is on: allocation counts are not exact
// under it (sync.Pool drops a share of what is put back, at random).
const raceDetector = false
