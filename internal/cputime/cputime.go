// Package cputime reads the CPU time the process, or the calling thread, has used: what the
// module's benchmarks report per operation where wall time would hide the work of goroutines
// running beside the timed one (both nodes of a forwarded ack, the owner's handler, the
// network), or charge the work of a helper thread to the operation.
package cputime
