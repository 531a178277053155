// Package nodeproc is the node process's side of the examples that run themselves again as
// their nodes (examples/cluster, examples/failover): the one HTTP server each node serves its
// peers and its clients on, from "ready" to a graceful shutdown when a signal comes or the
// parent goes; and the endpoints beside the library's handlers that both examples answer in
// the same way: produce, and each partition's status. The parent's side is package traffic;
// starting and stopping the processes is package procs.
package nodeproc
