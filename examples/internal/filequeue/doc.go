// Package filequeue is the in-process durable queue the examples run: one topic of the
// segmented file log of examples/filelog (the records, in dir/log) with a router.Node over it
// (the consumers' ack state, in dir/consumer), as examples/queue and examples/ordered open it,
// and the state directory a run keeps or removes.
package filequeue
