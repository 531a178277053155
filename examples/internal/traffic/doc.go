// Package traffic is the parent's side of the examples that run a queue over node processes
// (examples/cluster, examples/failover): the clients it plays against the nodes over HTTP
// (consumers on every node, a producer per partition through its owner), the loop that runs
// them until every record is acked and every partition drained, and the run's output lines.
// What a run checks of the deliveries is its own: the clients tell it through a Ledger.
//
// What a client does: each consume asks for one record, or for a batch of up to BatchMax one
// time in four, and long-polls for up to ConsumeWait. A record's first delivery is mostly
// acked; NackPerMille of them are nacked (visible again at once) and AbandonPerMille
// abandoned: never settled, as if the client had died holding it, so that it is delivered
// again once its lease lapses. A record delivered again is acked. Acks go through the node
// the record was consumed through, which forwards those of another node's partitions to
// their owner.
package traffic
