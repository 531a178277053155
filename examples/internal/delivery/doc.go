// Package delivery is the vocabulary the ledgers of examples/cluster and examples/failover
// share: where a record is (a Position), how a delivery of it ended as far as its client
// knows (an Outcome), read off an ack's answer by OutcomeOf, and the map of a ledger's
// records by position (Records). What each ledger keeps of a record, and checks with it (a
// crash window, phases and a failover's window), is its own.
package delivery
