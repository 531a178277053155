//go:build !race

package offsets_test

// raceDetector reports whether the race detector is on: the long sweeps run a share of their
// schedules under it (the README's test command), all of them without (a step of CI's).
const raceDetector = false
