// Package launch is the plumbing of an example that runs itself again as its node
// processes (examples/cluster, examples/failover): its main function and its test binary's
// TestMain, which run either the parent or, with the hidden node flags (NodeFlags), one node;
// the flags every parent takes (ParentFlags); the run's directory; free ports on 127.0.0.1;
// and the JSON config file the parent writes and every node reads (ConfigName: a Node per
// node, durations as Duration). Starting and stopping the node processes is package procs;
// a node's server is package nodeproc, the parent's clients package traffic.
package launch
