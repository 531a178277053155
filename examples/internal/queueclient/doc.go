// Package queueclient is the examples' HTTP client of their nodes: the consume API of
// router/httpapi (under /queue: consume, ack, nack, ack-batch), and the examples' own
// produce and status endpoints. examples/cluster and examples/failover both drive their
// node processes through it.
//
// An answer other than the one a call hoped for is an *Error; AckAnswer says what an
// ack's error means for the record.
package queueclient
