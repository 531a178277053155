//go:build !linux

package router_test

// threadCPU reports that a thread's own CPU time cannot be read here.
func threadCPU() (ns int64, ok bool) { return 0, false }
