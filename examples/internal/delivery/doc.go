// Package delivery is the vocabulary the ledgers of examples/cluster and examples/failover
// share: where a record is (a Position), and how a delivery of it ended as far as its client
// knows (an Outcome), read off an ack's answer by OutcomeOf. What each ledger checks with
// them (a crash window, phases and a failover's window) is its own.
package delivery
