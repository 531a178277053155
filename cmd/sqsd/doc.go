// Command sqsd is an SQS-compatible, durable queue server in one process: the file log of
// narad.dev/consume/examples/filelog holds the messages, a router.Node consumes it, and
// router/sqsapi serves it to the AWS SDKs and the AWS CLI, in SQS's JSON and query
// protocols. Queues are created, configured, purged and deleted through the API.
//
//	go run ./cmd/sqsd -dir data
//
// At its first start it generates a credential pair into data/credentials and prints it;
// a client signs with it:
//
//	export AWS_ACCESS_KEY_ID=... AWS_SECRET_ACCESS_KEY=... AWS_DEFAULT_REGION=us-east-1
//	aws --endpoint-url http://localhost:9324 sqs create-queue --queue-name orders
//
// # Signatures
//
// Every request's SigV4 signature is checked (see router/sqsapi, Authentication), against
// -credentials, a file of one "ACCESS_KEY_ID SECRET_ACCESS_KEY" a line (# comments), or,
// without it, against data/credentials, generated at the first start (mode 0600) and
// printed then. Why not check nothing by default, as the local SQS emulators do: the SDKs
// and the CLI sign every request whatever the server does, so they need some key anyway and
// a printed one costs one export line; and a queue server that takes every request from
// whoever reaches its port is not what someone who runs one expects. -no-auth checks no
// signature (any key is taken) and says so loudly at start. With TLS (-tls-cert, -tls-key)
// requests are also hidden, and a signed request cannot be replayed by whoever saw it.
//
// # Durability
//
// A message is written, and with -fsync (the default) fsynced, before its SendMessage is
// answered (group-committed: an fsync is a partition's, and a standard queue's send goes to
// a partition whose sends await one, so concurrent sends share it, the queue's partitions
// kept within 64 messages of each other: filelog.Store.AppendAny; a FIFO queue's send goes
// to its group's partition, sharing the fsync of the sends there); a DeleteMessage is
// answered once the ack is on disk (router.Node.AckDurable: group-committed, the deletes of
// a partition arriving meanwhile share the sync). So a crash, of the process
// or of the machine, loses no message whose send succeeded and delivers none whose delete
// succeeded again; messages received and not deleted are visible again after a restart.
// With -fsync=false a send reaches the page cache only, which a crash of the process does
// not lose and a crash of the machine may.
//
// At start the server loads every queue's partitions, so that GetQueueAttributes counts a
// queue's messages from the first request (the node counts a partition once something has
// loaded it).
//
// SIGINT and SIGTERM stop the server gracefully: long-polls end at once (answered
// ServiceUnavailable, which the SDKs retry), requests in progress get up to 5 s, the node
// closes, persisting its state, and an error closing it is logged and makes the exit status
// 1.
//
// # Redrive
//
// A queue's RedrivePolicy acts: the node quarantines a message received maxReceiveCount
// times without a delete (the queue's topic's MaxDeliveries; a policy set on a queue in use
// takes effect at once), and the server copies it into the dead-letter queue with its
// attributes (router/sqsapi, Redrive). StartMessageMoveTask, ListMessageMoveTasks and
// CancelMessageMoveTask move messages back; the tasks live in memory, and a stop cancels
// the running ones. A message is copied into the dead-letter queue first, then settled
// for good in the source partition (router.Node.Discard), and each start copies again
// whatever is still quarantined in a queue with a RedrivePolicy (a crash came between the
// two, or the copy failed: its dead-letter queue was deleted, say), so a message reaches the
// dead-letter queue at least once and is never lost (with -fsync: without it a power cut
// may lose the copy's append, as it may any send).
//
// # FIFO queues
//
// A queue created with a name ending in .fifo and FifoQueue=true is a FIFO queue
// (router/sqsapi, FIFO queues): its topic is ordered (router.TopicConfig.Ordered, through
// sqsapi.TopicConfig), and a message's MessageGroupId is its record's key, appended to the
// partition the key hashes to (CRC-32 modulo the queue's partitions, fixed when the queue is
// created), so a group keeps its order in one partition across restarts. The order and the
// one-receiver-per-group rule survive a restart (the node reads the records above the acked
// frontier again in offset order), and so does the deduplication window: the front end
// rebuilds it from the queue's records of the last 5 minutes at the queue's first send after
// the start (each record carries its MessageDeduplicationId and the time of its send), so a
// send repeated across a restart within 5 minutes is deduplicated. A ReceiveRequestAttemptId's
// answer is in memory only: a receive retried across a restart is a new receive.
//
// # The data directory
//
//	queues.json   the queues: name, topic, attributes, tags, timestamps; written whole to
//	              queues.json.tmp, fsynced and renamed (the directory fsynced), with a CRC-32C
//	              in its first line: a damaged file stops the server at start, with the
//	              file's name, rather than starting it without its queues
//	log/          the file log: one topic per queue life (<name>~<creation time>), so a
//	              queue deleted or purged and created again starts empty; a deleted or
//	              purged life's files are removed at the next start
//	consumer/     the node's ack state (router.Config.Dir)
//	credentials   generated at the first start when -credentials is not given
//	receipt.key   the key of the receipt handles' tags, made at the first start, so
//	              handles stay valid across a restart
//
// # Not done
//
// Cluster mode (several processes over router/nodehttp, each owning partitions): one
// process serves every queue. Message retention (MessageRetentionPeriod is kept and
// answered, and the log keeps every message until its queue is purged or deleted).
package main
