// Package workers is the node's goroutine pool for background functions: RPCs that run on
// past their caller, bounded by their budgets. A function run goes to a parked worker where
// there is one, since a parked worker keeps the stack an RPC's deep call chain grew (a new
// goroutine grows its small stack by copying it, more than once per RPC); at most maxIdle
// workers stay parked, the rest end. Close waits for every function run and every worker.
package workers
