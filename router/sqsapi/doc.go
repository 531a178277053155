// Package sqsapi is an SQS-compatible front end over a node: an http.Handler a broker
// mounts, serving the actions an SQS consumer uses in both of SQS's wire protocols, JSON
// (AWS JSON 1.0) and query (form bodies, XML answers), so that the AWS SDKs old and new
// and the tools built on them consume the node's topics as SQS queues.
//
// # Mounting
//
//	api, err := sqsapi.New(node, sqsapi.Config{
//		Queues:  func(name string) (string, bool) { return name, topics.Has(name) }, // fixed queues; or
//		// Store: store, // the host's QueueStore: queues created, listed, deleted through the API
//		BaseURL: "https://broker.example.com/sqs",
//		Produce: produce, // optional: SendMessage and SendMessageBatch (or ProduceRecord, to keep message attributes)
//		ReceiptKey: secret, // the same on every node a client's receipt handles may reach
//		Credentials: func(accessKeyID string) (string, bool) { // SigV4: without it, NO signature is checked
//			secret, ok := keys[accessKeyID]
//			return secret, ok
//		},
//		Authorize: func(r *http.Request, req sqsapi.Request) error { // optional: per key, per action
//			return policy.Allow(req.AccessKeyID, req.Action, req.Queue)
//		},
//	})
//	...
//	mux.Handle("/sqs", api)  // what clients use as the SDK's BaseEndpoint
//	mux.Handle("/sqs/", api) // for the SDKs that post to the queue's URL
//	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
//
// A ReceiveMessage long-polls for up to 20 s: a server with a WriteTimeout sets it above
// 20 s plus router.ConsumeOverrun. A client points an SDK at the handler with its base
// endpoint (aws.String("https://broker.example.com/sqs")), any region (or Config.Region),
// and an access key and secret that Config.Credentials knows.
//
// # The protocol
//
// Every request is a POST, and its protocol is chosen per request, as SQS chooses it: with
// an X-Amz-Target header, JSON; without one and with a form body
// (application/x-www-form-urlencoded), query. A request of neither is MissingAction.
//
// JSON: X-Amz-Target: AmazonSQS.<Action> and a JSON body whose members have SQS's names
// (QueueUrl, MaxNumberOfMessages, ReceiptHandle, Entries, ...). Its Content-Type, when it
// has one, is application/x-amz-json-1.0 (or -1.1). A response is a 200 with a JSON body
// (application/x-amz-json-1.0), or an error (below). Members a request carries that the
// handler does not know are ignored, as SQS ignores them; a known member of the wrong JSON
// type, or a body that is not one JSON object, is a SerializationException.
//
// Query: a form with Action=<Action> (and Version=2012-11-05, which is not looked at) and
// the parameters of SQS's query API, as the SDKs before the JSON protocol (botocore before
// 1.31, Debian's python3-boto3 and awscli) send them: lists flattened (AttributeName.1=All,
// MessageAttributeName.1, MessageSystemAttributeName.1), message attributes as
// MessageAttribute.N.Name and MessageAttribute.N.Value.DataType, .StringValue and
// .BinaryValue (base64), the AWSTraceHeader as MessageSystemAttribute.N.*, a batch's
// entries as SendMessageBatchRequestEntry.N.<member>, DeleteMessageBatchRequestEntry.N.*
// and ChangeMessageVisibilityBatchRequestEntry.N.* (N from 1 to 1000, without leading
// zeros; another index is ignored, as is a parameter the action does not have). A form is
// translated into the JSON input, so both protocols are checked alike; an integer that is
// not one, a BinaryValue that is not base64, or two message attributes of one name are
// InvalidParameterValue, and a body that is no form (bad escapes, not UTF-8) is
// MalformedQueryString. A response is a 200 with SQS's XML (text/xml):
//
//	<ReceiveMessageResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/"><ReceiveMessageResult>
//	 <Message><MessageId>0:42</MessageId><ReceiptHandle>...</ReceiptHandle><MD5OfBody>...</MD5OfBody><Body>...</Body>
//	  <Attribute><Name>ApproximateReceiveCount</Name><Value>1</Value></Attribute>
//	  <MD5OfMessageAttributes>...</MD5OfMessageAttributes>
//	  <MessageAttribute><Name>n</Name><Value><StringValue>1.5</StringValue><DataType>Number.float</DataType></Value></MessageAttribute>
//	 </Message></ReceiveMessageResult><ResponseMetadata><RequestId>...</RequestId></ResponseMetadata></ReceiveMessageResponse>
//
// and likewise for each action (<Action>Response, <Action>Result, a batch's
// <Action>ResultEntry and BatchResultErrorEntry elements; no Result element for
// DeleteMessage and ChangeMessageVisibility), or an error (below). XML holds SQS's body
// characters only: a body a host's own producer wrote with others (or not UTF-8) is
// answered in base64, as a JSON answer answers a body that is not UTF-8, and a String
// attribute's value of that kind as a Binary.
//
// The path is not looked at: most SDKs post to the base endpoint, some to the queue's URL.
// A body is read through an http.MaxBytesReader of MaxRequestBytes: never more.
//
// The actions served:
//
//	ReceiveMessage                 consume up to MaxNumberOfMessages (1 to 10, default 1),
//	                               long-polling up to WaitTimeSeconds (0 to 20; absent, the
//	                               queue's ReceiveMessageWaitTimeSeconds, or 0), leased for
//	                               VisibilityTimeout (1 to 43200 s; absent, the queue's
//	                               VisibilityTimeout, or the topic's)
//	DeleteMessage(Batch)           ack (a batch: one router.Node.AckBatch)
//	ChangeMessageVisibility(Batch) extend to VisibilityTimeout from now (0 to 43200 s; it may
//	                               shorten the lease too); 0 ends it (a nack-now)
//	SendMessage(Batch)             Config.Produce or Config.ProduceRecord, one record per
//	                               message, its message attributes the record's headers,
//	                               its MessageGroupId the record's key (see FIFO queues)
//	GetQueueUrl                    Config.BaseURL + "/" + QueueName
//	GetQueueAttributes             ApproximateNumberOfMessages, ...NotVisible, ...Delayed;
//	                               with Config.Store the queue's attributes, QueueArn and
//	                               timestamps (see Queue management)
//	CreateQueue, DeleteQueue,      with Config.Store (see Queue management); without it,
//	ListQueues, SetQueueAttributes, UnsupportedOperation (but a CreateQueue of an existing
//	TagQueue, UntagQueue,          queue without attributes (but a FIFO queue's defaults)
//	                               or tags, which answers its URL)
//	ListQueueTags
//	PurgeQueue                     the node's router.Node.Purge, with Config.Store or
//	                               Config.Queues (see Queue management)
//	StartMessageMoveTask,          with Config.Store (see Redrive)
//	ListMessageMoveTasks,
//	CancelMessageMoveTask,
//	ListDeadLetterSourceQueues
//
// SQS's other actions (AddPermission and RemovePermission) answer UnsupportedOperation; an
// action SQS does not have answers InvalidAction.
//
// # Queues
//
// A queue is named by the last path segment of a request's QueueUrl, which Config.Queues
// maps to a topic (ok false: QueueDoesNotExist), or which Config.Store holds the record of
// (see Queue management); the rest of the URL is not checked, so a
// queue is reached whatever host name the client knows the broker by. A queue name is 1 to
// 80 letters, digits, hyphens, underscores and dots. A topic the node does not know
// (router.ErrUnknownTopic) is QueueDoesNotExist too. GetQueueAttributes counts the whole
// queue: every partition of the topic, as router.Node.QueueStatus reports them (through
// QueueCounter), the partitions other nodes own asked of their owners, one frame per owner;
// a partition not loaded since its owner started counts what its persisted state says (its
// files, or the host's state store), so a node that has served nothing yet counts its
// backlog all the same. A partition whose owner
// does not answer within router.StatusBudget (2 s; the request's context bounds it too), is
// down, or runs a release before node wire version 12 counts nothing: the counts are then
// a lower bound, as SQS's approximate counts may be. A node that is no QueueCounter (a
// fake) counts its router.Node.TopicStatus, the partitions it owns. ApproximateNumberOfMessages is the
// backlog that is visible now (not leased, delayed, acked ahead of a gap or quarantined),
// ApproximateNumberOfMessagesNotVisible the leased records, ApproximateNumberOfMessagesDelayed
// those a release's delay or a topic's backoff holds back. ApproximateAgeOfOldestMessage,
// which is no attribute of SQS's (it is a CloudWatch metric there) and is answered only when
// asked for by name (not in All), is the oldest router.PartitionStatus.OldestUnsettledAge of
// the partitions that know it, in whole seconds (0 when none does). SQS's other queue
// attribute names are accepted and not answered; a name SQS does not have is
// InvalidAttributeName.
//
// # Queue management
//
// With Config.Store, the host's QueueStore, the handler manages queues as SQS does: the
// store keeps each queue's record (its topic, attributes, tags and timestamps) and makes a
// new queue's topic in the host's log and deletes a deleted one's; MemQueueStore is one in
// memory, whose hooks (CreateTopic, DeleteTopic, PurgeTopic) reach the host's log. A request
// naming a queue resolves it with the store's Queue on every call.
//
//	CreateQueue         a queue of QueueName (1 to 80 letters, digits, '-', '_' and '.'; a
//	                    FIFO queue's ends in .fifo: see FIFO queues) with
//	                    the Attributes given, the others at their defaults, and the tags;
//	                    answers its URL. For a queue that exists: its URL, changing
//	                    nothing (its tags neither), when each attribute given has the
//	                    queue's value; QueueNameExists (query code QueueAlreadyExists) when
//	                    one has another
//	DeleteQueue         the queue and its topic, at once (SQS takes up to 60 s); a
//	                    CreateQueue of the name within RecentWindow (60 s) of the delete is
//	                    QueueDeletedRecently, as SQS refuses it; after, the queue starts
//	                    empty
//	ListQueues          the URLs of the queues whose names begin with QueueNamePrefix, in
//	                    order of name: without MaxResults, up to 1,000; with it (1 to 1,000),
//	                    a page and a NextToken for the next (a NextToken of another prefix,
//	                    or without MaxResults, is InvalidParameterValue)
//	SetQueueAttributes  the Attributes given, all or none
//	TagQueue            the Tags given, added or replaced (keys of 1 to 128 characters,
//	                    values of up to 256, no key beginning with aws:, at most 50 a queue)
//	UntagQueue          the TagKeys given removed (a key the queue has not is no error)
//	ListQueueTags       the tags
//	PurgeQueue          every message below the topic's high watermarks at the call deleted
//	                    (in flight, delayed or not yet received), durably: the node's
//	                    PurgeQueue (router.Node.PurgeQueue, through QueueWidePurger)
//	                    settles them as if acked, on every partition wherever it is owned
//	                    (the other owners asked with one frame each), and answers once that
//	                    is on every owner's disk, so a crash or a power cut after the
//	                    answer brings none back; messages sent meanwhile may go or stay, as
//	                    on SQS. A partition that could not be purged fails the call, the
//	                    others' purges standing (ServiceUnavailable, which the SDKs retry,
//	                    when an owner did not answer within router.PurgeBudget or is down;
//	                    InternalFailure for an owner on a release before node wire version
//	                    12). A node that is only a Purger (router.Node.Purge) purges the
//	                    partitions it owns. A store that is a QueuePurger (MemQueueStore
//	                    with a PurgeTopic) purges instead, unless it answers
//	                    errors.ErrUnsupported; with none, UnsupportedOperation. With
//	                    Config.Queues too (Authorize refuses it where a host wants none).
//	                    One purge a queue in RecentWindow (60 s), as SQS allows: another
//	                    within 60 s of the last that purged is PurgeQueueInProgress and
//	                    deletes nothing (a purge that failed does not count)
//
// Both windows are on Config.Now's clock and kept in the handler's memory: each handler of
// a cluster keeps its own, and a restarted one starts with none (a refusal only makes a
// client wait, so a window forgotten loses nothing).
//
// The attributes a queue keeps, and which act:
//
//	VisibilityTimeout              1 to 43200 s (default 30): the lease of its receives that
//	                               ask for none (SQS takes 0 too; a lease of no time is
//	                               refused here, as it is in a receive)
//	ReceiveMessageWaitTimeSeconds  0 to 20 (default 0): the long-poll of its receives that
//	                               ask for none
//	MaximumMessageSize             1024 to 1048576 bytes (default 1048576): the bound of a
//	                               message sent (body and attributes, as MaxMessageBytes)
//	MessageRetentionPeriod         60 to 1209600 s (default 345600): kept and answered; the
//	                               host applies it to its log's retention, if it will (the
//	                               record holds it)
//	DelaySeconds                   0 to 900 (default 0): the delay of a message sent without
//	                               one of its own (see Delayed messages)
//	RedrivePolicy                  none by default: {"maxReceiveCount":N,"deadLetterTargetArn":
//	                               "arn:aws:sqs:..."} (see Redrive); "" removes it
//	FifoQueue, ContentBasedDeduplication, DeduplicationScope, FifoThroughputLimit
//	                               a FIFO queue's only (see FIFO queues)
//
// A value out of range, or not a decimal integer, is InvalidAttributeValue, as is a value of
// one of SQS's attributes this endpoint does not keep (Policy, RedriveAllowPolicy, the KMS
// and SSE ones): refused, not kept without effect. A name SQS
// does not have, or of an attribute no one sets (QueueArn, ApproximateNumberOfMessages,
// ...), is InvalidAttributeName. GetQueueAttributes answers the kept attributes, QueueArn (arn:aws:sqs:<Config.Region or us-east-1>:<Config.AccountID or 000000000000>:
// <name>), CreatedTimestamp and LastModifiedTimestamp (seconds since the epoch, on
// Config.Now's clock; SetQueueAttributes moves the latter) and the counts. Every management
// action is put to Config.Authorize with its queue (none for ListQueues) first, and a
// refused one changes nothing.
//
// # Redrive
//
// A queue's RedrivePolicy, {"maxReceiveCount":N,"deadLetterTargetArn":"<a queue's ARN>"}
// (N from 1 to 1000, a number or a string of one, as SQS takes it), moves a message
// received N times without a delete to the dead-letter queue the ARN names; GetQueueAttributes
// answers it as SQS writes it ({"deadLetterTargetArn":"...","maxReceiveCount":N}). A policy
// that does not parse, or whose queue is not this endpoint's (its region and account, see
// QueueArn), does not exist or is the queue itself, is InvalidParameterValue ("Dead letter
// target does not exist", ...); a handler without Config.ProduceRecord, which could not keep
// a moved message's attributes, refuses any policy (InvalidAttributeValue).
//
// The node does the counting, the host the wiring, the handler the moving:
//
//	node, _ := router.New(router.Config{ ...,
//		Topic: func(topic string) router.TopicConfig {
//			rec, _ := store.QueueOfTopic(topic) // the host's own lookup
//			return sqsapi.TopicConfig(rec) // MaxDeliveries, VisibilityTimeout; Ordered for a FIFO queue
//		},
//		OnQuarantine: func(topic string, p int32, offset int64, _ uint32) {
//			rec, err := log.Read(topic, p, offset) // the record, from the host's log
//			var dlq string
//			if err == nil {
//				dlq, err = api.DeadLetter(ctx, topic, rec)
//			}
//			if err == nil && dlq != "" {
//				_, err = node.Discard(topic, p, offset) // copied: settled for good
//			}
//			...
//		},
//	})
//
// and the host's QueueStore calls router.Node.ReloadTopic when PutQueue changes a queue
// (MemQueueStore's Changed hook), so a policy set on a queue in use acts at once. Every receive counts (see Receipt handles), so
// after maxReceiveCount receives, whatever ended each (a lapsed visibility timeout, a
// ChangeMessageVisibility to 0), the node quarantines the message and Handler.DeadLetter
// produces it into the dead-letter queue's topic through Config.ProduceRecord: its body,
// its message attributes (their types and MD5 unchanged), its SentTimestamp, and a header
// "AWS.SQS.DeadLetterSourceQueue" naming its queue (which no receive answers). The host then
// settles it in the source partition with router.Node.Discard; a crash between the copy and
// the discard leaves it quarantined (router.Node.Quarantined), for the host to copy again at
// its next start: at least once, never lost. cmd/sqsd wires all this.
//
// ListDeadLetterSourceQueues answers the URLs of the queues whose RedrivePolicy names
// QueueUrl's queue, in order of name (queueUrls, in lower case, as SQS's JSON has it), paged
// as ListQueues is (MaxResults 1 to 1,000, NextToken).
//
// A message move task moves a dead-letter queue's messages back:
//
//	StartMessageMoveTask   SourceArn, a queue some queue's RedrivePolicy names (otherwise
//	                       InvalidParameterValue; not this endpoint's queue,
//	                       ResourceNotFoundException); DestinationArn, optional: a queue to
//	                       move every message to (without it, each goes back to the queue
//	                       it came from); MaxNumberOfMessagesPerSecond, 1 to 500 (without
//	                       it, as fast as it goes). A source with a task running refuses
//	                       another (InvalidParameterValue). Answers a TaskHandle
//	ListMessageMoveTasks   the latest MaxResults (1 to 10, default 1) tasks of SourceArn,
//	                       the latest first: Status (RUNNING, COMPLETED, CANCELLING,
//	                       CANCELLED, FAILED), the ARNs, ApproximateNumberOfMessagesMoved,
//	                       ApproximateNumberOfMessagesToMove (the source's visible messages
//	                       at the start), FailureReason, StartedTimestamp (milliseconds),
//	                       and the TaskHandle of a running one; in XML, one
//	                       ListMessageMoveTasksResultEntry each
//	CancelMessageMoveTask  TaskHandle: a running task stops after the message it is
//	                       moving; answers ApproximateNumberOfMessagesMoved. A task that
//	                       is not running, or a handle never issued, is
//	                       ResourceNotFoundException
//
// A task runs in a goroutine of the handler's: it receives the source's messages (10 at a
// time, leased for 30 s), produces each into its destination through Config.ProduceRecord
// (the source header dropped: it is received afresh, its ApproximateReceiveCount from 1)
// and deletes it from the source, until the source has no visible message (COMPLETED). A
// message it cannot move (one without a source header and no DestinationArn, a destination
// deleted, a produce's error) is given back and the task is FAILED with the reason. A
// crash between a message's produce and its delete leaves it in both queues: a move is at
// least once. Without Config.MoveTasks tasks are kept in memory: a new handler lists none,
// and Handler.Close ends the running ones (CANCELLED) and waits for them. With it (a
// MoveTaskStore: cmd/sqsd keeps one in a file) the handler saves its tasks (the 10 latest a
// source) at a task's start (a start that cannot be saved is InternalFailure, and no task
// runs), as it moves (at most once a second), at a cancel and at its end; Handler.Close
// stops the running ones and saves them RUNNING, with what they moved; and New lists what
// the store kept and resumes each RUNNING task, at its rate, from what its source still
// holds (a task whose source queue is gone is FAILED, one being cancelled CANCELLED). A
// resumed task's ApproximateNumberOfMessagesMoved is that of its last save, so it may count
// up to a second's moves short.
//
// # Receiving
//
// A received message is
//
//	{"MessageId":"0:42","ReceiptHandle":"0:42:1311768467294899695:9f86d081884c7d65",
//	 "MD5OfBody":"<hex MD5 of Body>","Body":"...",
//	 "Attributes":{"ApproximateReceiveCount":"1","SentTimestamp":"1767366245123",
//	               "ApproximateFirstReceiveTimestamp":"1767366250000"}}
//
// where:
//
//   - MessageId is partition:offset, the same for every delivery of the record and what
//     SendMessage answered for it.
//   - ReceiptHandle is the node's receipt handle (router.Handle's text) and a tag that binds
//     it to the queue (see Receipt handles): opaque to the client, and unforgeable (its
//     nonce is drawn from the shard's stream).
//   - Body is the record's value when it is valid UTF-8, and its standard base64 (with
//     padding) otherwise, since an SQS body is text. MD5OfBody, which the SDKs check, is
//     the MD5 of Body as written. The record's key is delivered as its MessageGroupId only.
//   - Attributes holds the system attributes asked for in MessageSystemAttributeNames (or
//     the older AttributeNames; "All" is all seven, a standard queue's five):
//     ApproximateReceiveCount is the
//     delivery's attempt (router.Message.Attempt), SentTimestamp the record's timestamp in
//     ms (left out for a record without one), ApproximateFirstReceiveTimestamp the time this
//     handler first delivered the record, on every delivery (the node keeps a record's
//     attempts, not the time of its first delivery: the handler remembers it, in memory,
//     for up to 65,536 records, forgetting a record when it is deleted; a redelivery of a
//     record it does not remember, first delivered before it started, through another
//     node's handler, or forgotten, answers the time of this receive), AWSTraceHeader the
//     one the message was sent with (left out for one sent without), MessageGroupId the
//     record's key (left out for a record without one, or with one that is not UTF-8),
//     and for a FIFO queue's message MessageDeduplicationId and SequenceNumber (see FIFO
//     queues). SQS's other names are accepted and not answered.
//   - MessageAttributes holds the record's headers (router.Message.Headers) that
//     MessageAttributeNames asks for ("All" or ".*" every one, a name that one, "prefix.*"
//     every name beginning with "prefix."; none asked, none answered), in order of name,
//     each of the data type it was sent with (see Sending: String, Number, Binary, custom
//     types such as Number.float kept, a Binary of valid UTF-8 still a Binary), and a
//     header no SendMessage wrote (a host's own producer's) a String when its value is
//     valid UTF-8 and a Binary otherwise, with MD5OfMessageAttributes computed as SQS
//     computes it over what is answered: for a message sent here, the MD5 its send
//     answered. SQS's attributes are a map: of a key the record repeats, the last header is
//     answered; a header whose key is empty or not valid UTF-8, which no SQS client could
//     name, or begins with "AWS.SQS." (the types and trace header), is left out. A record
//     delivered through a node of a release before wire version 9 carries no headers.
//
// A receive with nothing to deliver (its wait ran out) answers {}. The response holds at
// most router.ResponseLimit bytes: the handler measures each message at its encoded size and
// cuts the batch with router.Node.FitResponse, which gives the rest back at once. A client
// that disconnects ends its long-poll at once (the request's context is the consume's), and a
// record taken for a client that left, or whose response could not be written, is given back
// (released), so it is visible again at once rather than after its visibility timeout.
//
// Each client identity (the access key ID with Config.Credentials, the remote host without,
// or Config.Identity's) may have at most Config.MaxInFlight ReceiveMessage requests in
// flight (DefaultMaxInFlight); one more is answered RequestThrottled, which the SDKs retry
// with backoff.
//
// # Receipt handles
//
// A receipt handle names its queue: it is the node's handle text, a colon, and a tag of 16
// lowercase hex digits, the first 8 bytes of HMAC-SHA256 keyed with Config.ReceiptKey over
// the queue's name, a zero byte and the node's handle text. A handle that does not parse,
// or whose tag is not the one its queue and node handle have (a handle of another queue,
// even of the same topic; one changed in any part; one made up, naming a partition the
// queue lacks, say), is ReceiptHandleIsInvalid, and reaches no node: it changes nothing.
// The handlers that one client's handles may reach (the nodes of a cluster behind one
// endpoint) share one ReceiptKey. A well-tagged handle of a partition the queue lacks (one
// removed since the handle was issued, or made up by a client that knows the empty key's
// scheme) reaches the node, which answers it as it answers a partition it cannot reach
// (router.ErrNotLocal, router.ErrUnavailable), since it does not tell the two apart: with
// Config.Routes the handler asks the routes then, and answers ReceiptHandleIsInvalid for a
// partition they name on no node; without them, ServiceUnavailable. A handle that is the
// queue's answers as SQS answers an expired or stale handle, when it names no live lease or
// a message deleted already:
//
//	node's answer                         DeleteMessage          ChangeMessageVisibility
//	the live lease                        deleted (acked)        visibility changed
//	router.ErrGone: the lease lapsed,     InvalidParameterValue  MessageNotInflight
//	  was nacked, or was superseded,      ("The receipt handle
//	  its owner restarted (or the         has expired"),
//	  handle was never issued)            nothing deleted
//	router.ErrAlreadySettled: the message success                InvalidParameterValue ("Message
//	  was deleted already                                          does not exist or is not
//	                                                               available for visibility
//	                                                               timeout change")
//
// A DeleteMessage that succeeds has deleted the message: a delete whose lease is gone is
// refused, as SQS refuses an expired handle (always on a FIFO queue), rather than answered
// success with nothing deleted, which SQS's documentation allows a standard queue and which
// would leave a client taking the message for done while it comes back. A delete retried
// after its first attempt deleted the message (a lost reply, an SDK's retry) succeeds.
//
// ChangeMessageVisibility with VisibilityTimeout 0 ends the lease with a nack-now
// (router.Node.NackNow, through NowNacker): the delivery stays counted, as SQS counts every
// receive, so the next delivery's ApproximateReceiveCount is one more and the topic's
// MaxDeliveries quarantines a message a consumer keeps giving up on; the message is visible
// again at once, whatever the topic's Backoff. The partition's owner on a release before
// the node wire's version 14 gets a nack of no delay instead, and holds the message back for
// the Backoff's delay (a Node that is no NowNacker does the same).
// A longer timeout is an extend (router.Node.Extend), which the topic's MaxExtension and
// MaxLeaseLifetime cap. The batches answer each entry as the single action would, in Failed
// (Code, SenderFault, Message) or in Successful.
//
// # Sending
//
// SendMessage and SendMessageBatch hand each body to Config.Produce, or, with its message
// attributes as the record's headers, to Config.ProduceRecord (without either they answer
// UnsupportedOperation; a standard queue's batch hands its entries over at once, so that a
// host's log may share one write or fsync among them, and a FIFO queue's in order), and answer the MessageId partition:offset it returns, the body's
// MD5, which the SDKs check, and, for a message with attributes, their MD5
// (MD5OfMessageAttributes, over the attributes as sent; MD5OfMessageSystemAttributes for an
// AWSTraceHeader). A record's headers are, in order: one per message attribute, in order of
// name, its name and its value (a String's or Number's text, a Binary's bytes); one per
// attribute of another data type than String, "AWS.SQS.DataType.<name>" and the type
// ("Number", "Binary", "Number.float", ...); and for a message with the AWSTraceHeader
// system attribute (a String, the one system attribute SQS takes), "AWS.SQS.AWSTraceHeader"
// and its value. No message attribute's name begins with "AWS.", so these never clash with
// one. A message is 1 to MaxMessageBytes (1 MiB, 1,048,576 bytes; with Config.Store, the
// queue's MaximumMessageSize) of SQS's characters (#x9, #xA, #xD, #x20 to #xD7FF, #xE000 to
// #xFFFD, #x10000 to #x10FFFF; another is InvalidMessageContents), its body and its
// attributes (names, types and values) together, and a batch's messages together at most
// MaxMessageBytes (BatchRequestTooLong); over it, InvalidParameterValue. The node takes
// such records as they come: its batch bound (router.BatchPayloadBytes, 4 MiB) keeps the
// record that crosses it, and FitResponse keeps a response's first record whatever its
// size. Attributes are checked as SQS checks them: at most 10; names of 1 to 256 letters,
// digits, '_', '-' and '.', no period first, last or twice in a row, none beginning with
// AWS. or Amazon.; a data type of String, Number or Binary, perhaps with a custom type
// after a period; a non-empty value of the type's kind (a Number's a number, a String's of
// the body's characters); no list values. What a record cannot carry is refused, not
// dropped: MessageAttributes and MessageSystemAttributes with Config.Produce (which has
// nowhere to keep them), a system attribute other than AWSTraceHeader, a DelaySeconds out of
// 0 to 900 (or any but 0, its own or its queue's, with Config.Produce), a MessageGroupId with
// Config.Produce, and a MessageDeduplicationId to a standard queue are each
// InvalidParameterValue, the message not sent. A standard queue
// takes a MessageGroupId, as SQS's fair queues do: the record's key, answered by a receive
// as its MessageGroupId, with no effect on delivery (no fairness among groups here).
//
// # Delayed messages
//
// A message sent with a DelaySeconds (0 to 900; none: its queue's DelaySeconds) carries when
// its delay ends, on the handler's clock (Config.Now), in a header no receive answers
// ("AWS.SQS.DeliverAt"), and NotBefore, the node's router.Config.NotBefore, reads it: the node
// delivers it to no receive before then, spends no receive on it, and hands it to a receive
// long-polling for it as the delay ends (see router.Config.NotBefore). So a host that mounts
// the handler sets NotBefore on its node, and the node's clock follows the handler's.
// ApproximateNumberOfMessagesDelayed counts the delayed messages the node has read (and the
// messages a visibility change or a nack keeps invisible for a while); one not read yet counts
// in ApproximateNumberOfMessages. A FIFO queue takes its queue's DelaySeconds, and refuses a
// message's own, as SQS does.
//
// # FIFO queues
//
// A queue whose name ends in .fifo is a FIFO queue, as SQS tells one. With Config.Store,
// CreateQueue makes one of such a name with the attribute FifoQueue=true: a name ends in
// .fifo if and only if FifoQueue is true (otherwise InvalidParameterValue), and FifoQueue,
// as the other FIFO attributes, is InvalidAttributeName on a standard queue, false
// included, as SQS answers it. A FIFO queue's attributes, besides the others:
//
//	FifoQueue                  true; set as the queue is created only (InvalidAttributeName
//	                           in SetQueueAttributes)
//	ContentBasedDeduplication  false (default) or true
//	DeduplicationScope         queue (default) or messageGroup
//	FifoThroughputLimit        perQueue (default) or perMessageGroupId, with a
//	                           DeduplicationScope of messageGroup only; kept and answered,
//	                           without effect (the handler limits no throughput)
//
// taken in any case and answered as SQS writes them; another value is InvalidAttributeValue.
// GetQueueAttributes answers the four; a FIFO queue of Config.Queues answers SQS's
// defaults. A FIFO queue's dead-letter queue is a FIFO queue, and a standard queue's a
// standard queue (InvalidParameterValue otherwise).
//
// The node orders a FIFO queue's messages: its topic is ordered (router.TopicConfig.Ordered;
// TopicConfig answers it for a queue's record, and a host of Config.Queues sets it for its
// FIFO queues' topics), a message's MessageGroupId is its record's key, and
// Config.ProduceRecord puts a key's records in one partition. So a group's messages are
// delivered in the order they were sent; a receive may hold several consecutive messages of
// a group, and while one of a group's messages is in flight (received, not deleted, its
// visibility timeout running) no other receive gets the group's later ones, while the other
// groups go on; a message given back (ChangeMessageVisibility to 0, a lapsed visibility
// timeout) is delivered again before the group's later messages, and those that waited
// behind a held group come with it once it frees, in order. A message that reaches the
// RedrivePolicy's maxReceiveCount leaves for the dead-letter queue, and its group goes on
// (the order knowingly broken, as SQS breaks it). Config.Produce, which keeps no key,
// serves no FIFO queue: a MessageGroupId is refused.
//
// SendMessage and SendMessageBatch to a FIFO queue: MessageGroupId is required
// (MissingParameter); a MessageDeduplicationId, or ContentBasedDeduplication, whose id is
// the body's SHA-256 in hex (an id sent overrides it), is required too (InvalidParameterValue,
// "The queue should either have ContentBasedDeduplication enabled or MessageDeduplicationId
// provided explicitly."); each id is 1 to 128 ASCII letters, digits and punctuation; a
// DelaySeconds but 0 is InvalidParameterValue. A message whose deduplication id was sent to
// the queue less than DeduplicationWindow (5 minutes, on Config.Now's clock, from the first
// send) before is accepted and answered with the original's MessageId and SequenceNumber
// (and the MD5s of what it carries), and not sent again; with a DeduplicationScope of
// messageGroup an id is the group's. A send of an id another send is sending waits for it;
// a send that failed holds no id. The id is kept with the record (a header
// "AWS.SQS.MessageDeduplicationId", which no receive answers as a message attribute), and a
// receive answers it as MessageDeduplicationId. The answers carry a SequenceNumber: the
// record's partition times 2^64 plus its offset, in decimal, the same for every delivery of
// the record. It grows within a group (a group's records are in one partition, in the order
// they were sent), is not consecutive, and fits SQS's 128 bits.
//
// The deduplication window is the handler's, in memory, per queue: at most
// MaxDeduplicationIDs ids (past it the oldest is forgotten before its 5 minutes end, which
// only a queue sent over 436 messages a second meets). A restarted handler rebuilds it from
// the log at the queue's first send, when its node is a Replayer (router.Node.Replay, found
// by type assertion): a FIFO queue's record carries its deduplication id and the time of its
// send on Config.Now's clock (router.Record.Timestamp, which the host keeps), so the ids of
// the records sent in the last 5 minutes (and since the queue was created) come back, each
// for what is left of its 5 minutes, and a send retried across a restart is deduplicated as
// one retried before it. The rebuild reads, of each partition of the queue (every one, with
// a QueueCounter node, wherever it is owned), at most MaxDeduplicationIDs records, the newest,
// from the first of the window on, found by a binary search over the records' timestamps
// (about 17 single-record reads; a host clock that stepped back may hide a few ids), and
// keeps the newest MaxDeduplicationIDs ids (holding at most twice that while it reads); a
// record without a timestamp, without an id, or that a redrive copied is passed over. The other
// sends of the queue wait for it; one that fails (a partition's owner down, say) fails the
// send that waited for it, ServiceUnavailable for a node's unavailability, which the SDKs
// retry, and the next send rebuilds again: a send is never taken for new for want of the
// log's ids. Each handler of a cluster keeps its own window: a send retried through another
// handler within the 5 minutes is sent again (a duplicate, as a standard queue's send
// retried is), unless the host routes a queue's sends to one handler. DeleteQueue forgets
// the queue's ids; PurgeQueue does not (SQS tracks an id past its message's delete). A
// message a redrive or a move task produces is not deduplicated.
//
// ReceiveMessage on a FIFO queue takes a ReceiveRequestAttemptId (1 to 128 ASCII letters,
// digits and punctuation; another is InvalidParameterValue). A receive retried with the id
// of one that answered messages (its answer lost on the way, say), to the same queue,
// signed with the same access key, within ReceiveAttemptWindow (5 minutes from that
// receive, on Config.Now's clock) is answered with the same messages and receipt handles,
// their ApproximateReceiveCount and ApproximateFirstReceiveTimestamp unchanged, and their
// visibility timeout reset to the first receive's, as SQS answers it: the node extends each
// lease. Once one of them was deleted, had its visibility changed (through this handler), was
// given back or its visibility timeout lapsed, the retry is a new receive (answered and
// remembered under the id in turn), as after the window. The answers are the handler's, in
// memory: at most MaxReceiveAttempts (4,096) of them, holding at most MaxReceiveAttemptBytes
// (32 MiB) of keys, bodies and headers (an answer over that is not remembered), the oldest
// forgotten first past either; a receive that answered nothing is not remembered. A restarted
// handler, or another handler of a cluster, remembers none: there the retry is a new receive,
// and the first answer's messages come back once their visibility timeout lapses, holding
// their groups until then. A visibility change made through another handler is not seen: the
// retry then answers the messages again, their visibility timeout reset.
//
// # Errors
//
// An error of the query protocol is the status below and SQS's XML error (text/xml), whose
// Code is the query code below and Type Sender or Receiver:
//
//	<ErrorResponse xmlns="http://queue.amazonaws.com/doc/2012-11-05/"><Error><Type>Sender</Type>
//	 <Code>AWS.SimpleQueueService.NonExistentQueue</Code><Message>...</Message><Detail/></Error>
//	 <RequestId>...</RequestId></ErrorResponse>
//
// (botocore maps the Code to its modeled exceptions: QueueDoesNotExist, ...). An error of
// the JSON protocol is the status below, an x-amzn-query-error header with the query code
// and ;Sender or ;Receiver (which the SDKs read for the error's code), and a body
//
//	{"__type":"com.amazonaws.sqs#QueueDoesNotExist","message":"The specified queue does not exist."}
//
// from which the AWS SDK for Go builds its typed errors (*types.QueueDoesNotExist, ...):
//
//	status  __type                        x-amzn-query-error code                   when
//	400     QueueDoesNotExist             AWS.SimpleQueueService.NonExistentQueue   no such queue or topic
//	404     ReceiptHandleIsInvalid        ReceiptHandleIsInvalid                    a handle that does not parse or
//	                                                                                is not the queue's
//	400     MessageNotInflight            AWS.SimpleQueueService.MessageNotInflight see Receipt handles
//	404     InvalidAddress                InvalidAddress                            a QueueUrl that is no URL
//	400     InvalidAttributeName          InvalidAttributeName                      an attribute name SQS has not
//	400     InvalidAttributeValue         InvalidAttributeValue                     a queue attribute's value refused
//	400     QueueNameExists               QueueAlreadyExists                        CreateQueue of an existing queue
//	                                                                                with another attribute
//	400     QueueDeletedRecently          AWS.SimpleQueueService.QueueDeletedRecently CreateQueue of a name deleted
//	                                                                                within 60 s
//	403     PurgeQueueInProgress          AWS.SimpleQueueService.PurgeQueueInProgress PurgeQueue within 60 s of the
//	                                                                                queue's last purge
//	400     ResourceNotFoundException     ResourceNotFoundException                 a move task's queue or handle
//	                                                                                unknown
//	400     InvalidMessageContents        InvalidMessageContents                    a body character SQS refuses
//	400     UnsupportedOperation          AWS.SimpleQueueService.UnsupportedOperation an SQS action not served
//	400     EmptyBatchRequest, TooManyEntriesInBatchRequest, BatchEntryIdsNotDistinct,
//	        InvalidBatchEntryId, BatchRequestTooLong (AWS.SimpleQueueService.<name>)  a batch's entries
//	403     RequestThrottled              RequestThrottled                          MaxInFlight receives already
//	400     InvalidParameterValue         InvalidParameterValue                     a value out of range; see Sending
//	400     MissingParameter              MissingParameter                          a required member absent
//	400     MissingAction, InvalidAction  (the same)                                no or an unknown X-Amz-Target or
//	                                                                                Action
//	400     SerializationException        SerializationException                    JSON: not one JSON object; a member
//	                                                                                of the wrong type; another
//	                                                                                Content-Type
//	400     MalformedQueryString          MalformedQueryString                      query: a body that is no form
//	403     MissingAuthenticationToken    MissingAuthenticationToken                no signature (see Authentication)
//	400     IncompleteSignature           IncompleteSignature                       a malformed signature
//	403     InvalidClientTokenId          InvalidClientTokenId                      an access key Credentials does not know
//	403     SignatureDoesNotMatch         SignatureDoesNotMatch                     a wrong signature, or one made more
//	                                                                                than MaxClockSkew from now
//	403     AccessDenied                  AccessDenied                              Config.Authorize refused it
//	405     MethodNotAllowed              MethodNotAllowed                          not a POST
//	503     ServiceUnavailable            ServiceUnavailable                        try again: the node is closing, an
//	                                                                                owner is down or unreachable, the
//	                                                                                client's context ended
//	500     InternalFailure               InternalFailure                           anything else (a host error), logged
//
// PurgeQueueInProgress's 403 is the status of SQS's service model, which the SDKs are
// generated from (its API reference says 400); the SDKs tell the error by its code.
// A body over MaxRequestBytes is InvalidParameterValue (BatchRequestTooLong for a batch).
// Nothing malformed reaches the node; no request panics the handler.
//
// # Authentication
//
// With Config.Credentials the handler checks every request's SigV4 signature, as SQS does,
// before anything else about it is answered; WITHOUT IT NO SIGNATURE IS CHECKED: the
// Authorization, X-Amz-Date, X-Amz-Security-Token and X-Amz-Content-Sha256 headers an SDK
// sends are not looked at, and anyone who can reach the handler may call every action it
// serves unless Config.Authorize refuses. A host that serves beyond a trusted network sets
// Credentials (and TLS in front of the handler: SigV4 authenticates requests, it does not
// hide them).
//
// What the SDKs sign is checked: an Authorization header of AWS4-HMAC-SHA256 with its
// Credential (<access key ID>/<yyyymmdd>/<region>/sqs/aws4_request), SignedHeaders and
// Signature; the canonical request over the method, the path (URI-encoded again, as the
// SDKs encode it for every service but S3), the query string, each signed header's value
// (host is the request's Host: a proxy in front of the handler must pass on the Host the
// client signed) and the payload's SHA-256 (the body as it arrived: the JSON, or the query
// protocol's form; X-Amz-Content-Sha256, when sent and signed, must be the body's); the
// credential scope's day (X-Amz-Date's), service (sqs) and, with Config.Region, region
// (without it, any region: the signature covers the one named); and X-Amz-Date within
// MaxClockSkew (5 minutes, as AWS allows) of the handler's clock (Config.Now), in the past
// or the future. The SignedHeaders must include host and x-amz-date, and X-Amz-Target,
// X-Amz-Content-Sha256 and X-Amz-Security-Token when the request has them (an unsigned
// X-Amz-Target could turn a signed ReceiveMessage into another action over the same body).
// The signature is compared in constant time, and the check allocates nothing once a key's
// signing key for the day is derived (it is kept per access key, day and region, while
// Credentials answers the same secret).
//
// A refused signature changes nothing: the request reaches neither Config.Queues, nor
// Authorize, nor Produce, nor the node. The codes are AWS's, which the SDKs report:
//
//	no Authorization header                      403 MissingAuthenticationToken
//	a malformed Authorization or X-Amz-Date;     400 IncompleteSignature
//	  two Authorization headers; a header that
//	  must be signed left out of SignedHeaders
//	an access key Credentials does not know      403 InvalidClientTokenId
//	a wrong secret; a body or a signed header    403 SignatureDoesNotMatch
//	  changed; a scope of another service,
//	  region or day; an X-Amz-Content-Sha256
//	  that is not the body's
//	X-Amz-Date more than MaxClockSkew behind or  403 SignatureDoesNotMatch ("Signature expired:
//	  ahead of the handler's clock                 ... is now earlier than ... (... - 5 min.)",
//	                                               or "Signature not yet current")
//
// A stale signature is SignatureDoesNotMatch, as SQS answers it, rather than the
// RequestExpired of SQS's list of common errors: the AWS SDK for Go v2 (and the other SDKs
// of the clock skew correction) take SignatureDoesNotMatch, with an error's Date header more
// than 4 minutes from their clock, as clock skew, and sign again at the server's time; every
// error the handler answers carries a Date from the handler's clock for that. (botocore
// 1.29 does not correct skew: boto3 reports the ClientError with its code.) A signature
// proves who made a request, not that it is new: SigV4 lets a request seen on the wire be
// replayed within MaxClockSkew, as AWS does, which TLS prevents.
//
// Request.AccessKeyID tells Config.Authorize the key a request was signed with, and the
// bound on ReceiveMessage requests in flight (Config.MaxInFlight) is per access key, unless
// the host's Config.Identity names clients otherwise. Config.Authorize, when set, is asked
// about each request once its signature is checked and it has been decoded, with its
// action, its queue and its body as it arrived; its refusal is AccessDenied. A request
// refused as malformed is refused before Authorize is asked, and nothing reaches
// Config.Queues, Config.Produce(Record) or the node before Authorize allowed it (a receipt
// handle of another queue is refused after it, before the node).
//
// Not checked: presigned requests (a signature in the query string, which no SQS client
// sends: MissingAuthenticationToken), SigV4a and SigV2 (IncompleteSignature), and the
// X-Amz-Security-Token of temporary credentials, which is signed but not validated:
// Credentials answers for the access key ID alone, so a host that issues temporary
// credentials gives each its own key ID and checks the token in Authorize.
//
// # Not supported
//
// A receive's ReceiveRequestAttemptId retried through another handler or after a restart
// (see FIFO queues); fairness among a standard
// queue's message groups, and the throughput limits of FIFO queues; a deduplication window
// shared by a cluster's handlers (a restarted handler rebuilds its own from the log: see FIFO
// queues); queue management without
// Config.Store (PurgeQueue aside); a RedrivePolicy without Config.ProduceRecord, and the
// RedriveAllowPolicy (any queue may be a dead-letter queue); a reject (router.Node.Reject), since SQS has no action that fails a
// message for good: an SQS client leaves a message that will never succeed to the topic's
// MaxDeliveries, and a host that wants it quarantined at once serves the reject over
// router/httpapi; delays with Config.Produce (bodies only); message attributes' list values; a
// receive's VisibilityTimeout of 0; messages over 1 MiB; queries by GET, or with parameters
// in the URL's query string rather than the body.
package sqsapi
