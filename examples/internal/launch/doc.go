// Package launch is the plumbing of an example that runs itself again as its node
// processes (examples/cluster, examples/failover): its main function and its test binary's
// TestMain, which run either the parent or, with the hidden node flag, one node; the run's
// directory; free ports on 127.0.0.1; and the JSON config file the parent writes and every
// node reads. Starting and stopping the node processes is package procs.
package launch
