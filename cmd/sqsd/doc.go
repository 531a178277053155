// Command sqsd is an SQS-compatible, durable queue server in one process, or in several
// (see Cluster mode): the file log of
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
// not lose and a crash of the machine may: the server syncs the log each second, so such a
// crash loses about the last second of sends.
//
// At start the server loads every queue's partitions (in cluster mode, its own), so that
// GetQueueAttributes counts a queue's messages from the first request (the node counts a
// partition once something has loaded it).
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
// CancelMessageMoveTask move messages back; the tasks are kept in movetasks.json (the 10
// latest of each dead-letter queue), so ListMessageMoveTasks lists them after a restart, and
// a task running when the server stops (or crashes) resumes at the next start, at its rate,
// with what its dead-letter queue still holds (router/sqsapi, Redrive). A message is copied into the dead-letter queue first, then settled
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
//	queues.json   the queues: name, topic, attributes, tags, timestamps (in cluster mode,
//	              on a node other than the home, its copy of the home's); written whole to
//	              queues.json.tmp, fsynced and renamed (the directory fsynced), with a CRC-32C
//	              in its first line: a damaged file stops the server at start, with the
//	              file's name, rather than starting it without its queues
//	movetasks.json
//	              the message move tasks, each with its status and counts; written as
//	              queues.json is, with its own CRC-32C header line, and a damaged file stops
//	              the server at start, naming it
//	log/          the file log: one topic per queue life (<name>~<creation time>), so a
//	              queue deleted or purged and created again starts empty; a deleted or
//	              purged life's files are removed at the next start
//	consumer/     the node's ack state (router.Config.Dir)
//	credentials   generated at the first start when -credentials is not given
//	receipt.key   the key of the receipt handles' tags, made at the first start, so
//	              handles stay valid across a restart (not in cluster mode)
//
// # Cluster mode
//
// Several sqsd processes, each over its own data directory, serve the same queues as one
// set of SQS endpoints: a client may call any node, with the same credentials, and a
// message sent through one is received through another and deleted through a third. Each
// node reads the same cluster file and is told which entry it is:
//
//	{"secret": "<32 random bytes in hex, say>",
//	 "nodes": [{"id": "sqs-1", "peer": "10.0.0.1:7001"},
//	           {"id": "sqs-2", "peer": "10.0.0.2:7001"},
//	           {"id": "sqs-3", "peer": "10.0.0.3:7001"}]}
//
//	sqsd -dir data1 -addr :9324 -cluster cluster.json -node sqs-1 -credentials creds
//
// A node listens for its peers on its entry's peer address (the node wire of router/nodehttp
// and the endpoints below), apart from its SQS listener (-addr). Every node needs the same
// -credentials file (a pair generated by each node would be good on that node only), or
// -no-auth.
//
// Ownership is static: partition p of every queue is owned by nodes[p mod N], in the file's
// order, so the file must be the same on every node, and its list of nodes is fixed for
// the life of the data directories (a node added or removed, or the order changed, moves
// partitions away from the files that hold them: not supported). Each node's file log
// holds the messages of its own partitions; the node's router.Node has the others' as
// remote routes, so a receive through any node gets messages wherever they are, and a
// delete or a visibility change is forwarded to the message's owner, a delete answered once
// it is on that owner's disk. A receive of a standard queue that names no VisibilityTimeout
// of its own is served from what the node read ahead at the owners (router's "Reading
// ahead": what its receives took over the last 25 ms, up to 8,192 messages a queue, each
// held at most 50 ms, a tenth of the queue's visibility timeout if less, then given back);
// one that names its own, and a FIFO queue's, asks the owners. A node killed while holding
// messages reserved, or with receives in flight, leaves them invisible until their
// visibility timeout ends, as a client that dies
// holding messages does: -read-ahead bounds how many a node holds of a queue (0: none),
// for queues of long visibility timeouts. A queue with fewer partitions
// than nodes leaves the last nodes owning none of it: they serve it all the same. The
// receipt handles' key is derived from the secret, so a handle is good on every node (a
// new secret invalidates the handles in flight).
//
// A standard queue's send is appended to one of the partitions the receiving node owns,
// round robin, so it needs no other node; a node that owns none forwards it to an owner,
// trying the next owner while one is down. A FIFO queue's send goes to its group's
// partition (CRC-32 of MessageGroupId modulo the queue's partitions), forwarded to that
// partition's owner: while it is down the send is ServiceUnavailable, which the SDKs retry.
//
// The catalogue: the first node of the file is its home, which keeps queues.json as one
// server does. Each other node keeps a copy in its own queues.json, forwards CreateQueue,
// DeleteQueue, SetQueueAttributes, TagQueue and UntagQueue to the home (a write based on a
// record another node changed meanwhile is refused, ServiceUnavailable, and retried), and
// applies the home's answer at once: the node a client wrote through reads its write. The
// home tells the other nodes of each change and waits up to 1 s for each to have fetched
// it, so a node that answers knows of a queue by the time its CreateQueue is answered; one
// that did not answer in time asks again within a second (every node asks the home each
// second, and at once on a queue it does not know). SQS itself says a queue created or
// deleted may take a while to be seen everywhere; here the bound is about a second while
// the home is reachable. While it is not, writes are ServiceUnavailable and each node
// serves the queues as it last saw them (logging that it does). -partitions is the home's:
// it sets new queues' partitions. The catalogue has an ID, made by the home at its first
// start in cluster mode and kept in every copy: a node refuses a catalogue of another ID (the
// home started on another directory, whose empty catalogue would drop every queue), logs
// it, and serves its copy, until an operator moves its queues.json away; so does a node
// whose directory holds a one-process server's queues. A one-process server's directory
// does not become a cluster's with its messages: made the home, it keeps its queues, but
// the messages of their partitions the other nodes now own stay in its log, unread (drain
// or delete its queues first, or start the cluster on new directories).
//
// PurgeQueue is the node's router.Node.PurgeQueue: every owner settles its partitions'
// messages durably (their records stay in the log until the queue is deleted), and the
// purge fails, ServiceUnavailable, while an owner is down, the others' purges standing.
// GetQueueAttributes counts every partition, asking the other owners (a partition whose
// owner is down counts nothing: a lower bound). A message that reaches its
// maxReceiveCount is moved to the dead-letter queue by its partition's owner.
//
// A node that is down (crashed, stopped, cut off) leaves its partitions unavailable until
// it starts again on its directory: there is no failover. Receives through the others
// get the other partitions' messages; a delete or visibility change of one of its messages,
// a FIFO send to one of its groups, a purge, and a FIFO queue's first send through a node
// since that node started (which rebuilds its deduplication window from every partition)
// are ServiceUnavailable, answered at once when its address refuses connections and within
// the node wire's budgets (2 s for a forwarded delete, 5 s for a forwarded send) when it
// does not answer at all, never hanging. Its messages that were in flight are delivered
// again once it is back (their leases were its, in memory): a DeleteMessage with a handle of
// such a lease, after the restart, is refused as an expired handle (InvalidParameterValue,
// as SQS answers one; router/sqsapi, Receipt handles), and the message comes back. No
// message whose send succeeded is lost, and none whose delete succeeded comes back.
//
// What each node keeps for itself, as sqsapi's handlers of a cluster do (in memory, but for
// the move tasks, in the node's movetasks.json): a FIFO
// queue's deduplication window (a node rebuilds it from every partition's log at its first
// send of the queue since it started, and learns after that only the ids sent through it:
// a send retried through another node may be sent twice, as a standard queue's retried
// send may), a ReceiveRequestAttemptId's answer, the 60 s in which a queue's purge or a
// deleted name is refused, and the message move tasks started through it.
//
// Peers authenticate each other with a token derived from the secret and the file's list of
// nodes (HMAC-SHA256), sent as a bearer token on every peer request and every node wire
// connection and checked in constant time; a request without it is refused (403) before
// anything reads it, and the node wire takes only the nodes the file names. So nodes whose
// files list other nodes, or the same in another order, and would disagree about who owns
// what, refuse each other's calls as they would a stranger's. The peer listener speaks plain HTTP: the
// token and the messages cross the network in clear, and whoever reads that network can
// replay the token, so the peer addresses belong on a private network (or a tunnel). What an
// authenticated peer sends is still checked: a malformed request, a partition out of range
// or not this node's, a write naming another queue's topic are refused with an error.
//
// The peer endpoints, besides the node wire's POST /node: POST /sqsd/produce (a send
// forwarded to an owner), GET /sqsd/catalog, POST /sqsd/catalog/put and
// /sqsd/catalog/delete (at the home), and POST /sqsd/catalog/changed (the home's word that
// the catalogue changed, at the others).
//
// # Not done
//
// Failover and resizing in cluster mode (ownership is static, above), and TLS between the
// peers. Message retention (MessageRetentionPeriod is kept and answered, and the log keeps
// every message until its queue is deleted, or, in one process, purged).
package main
