//go:build race

package routertest

// raceDetector reports whether the race detector is on: the data race a planted bug puts
// between Read and Append shows only under it.
const raceDetector = true
