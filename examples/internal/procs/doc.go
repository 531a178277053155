// Package procs starts and stops the examples' child processes: the node processes that
// examples/cluster and examples/failover run (the program itself again, with a hidden flag).
//
// A child says "ready" on a line of its standard output once it serves; its other lines go
// to a callback. Its standard input is a pipe never written: the child may watch for it to
// close (the parent is gone, or asks it to finish). Its standard error is the parent's.
package procs
