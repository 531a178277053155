// Package testflags sets a test binary's defaults for its property tests: how many cases
// (checks) and how many steps per case rapid runs, unless the command line or the
// environment chose. Under the race detector the checks are a fifth: the state machines
// tested this way run on one goroutine, where the detector finds nothing and costs ten to
// twenty times the time, and the README's test command runs with it. The full counts run
// without it (a step of CI's). Race tells the tests whose own sweeps shrink under the
// detector (simulation seeds, crash points) that it is on.
package testflags
