package sqsapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"narad.dev/consume/router"
	"narad.dev/consume/router/internal/frontend"
)

// Node is what the handler uses of a *router.Node; tests may fake it.
type Node interface {
	Consume(ctx context.Context, topic string, opts router.ConsumeOptions) ([]router.Message, error)
	FitResponse(msgs []router.Message, size func(*router.Message) int, limit int) []router.Message
	Ack(ctx context.Context, topic string, handle router.Handle) error
	AckBatch(ctx context.Context, topic string, handles []router.Handle) []error
	Extend(ctx context.Context, topic string, handle router.Handle, d time.Duration) (time.Time, error)
	Nack(ctx context.Context, topic string, handle router.Handle, delay time.Duration) error
	Release(ctx context.Context, topic string, handle router.Handle) error
	TopicStatus(topic string) ([]router.PartitionStatus, error)
}

var _ Node = (*router.Node)(nil)

// A Purger is a Node that purges a topic, found by type assertion: router.Node.Purge, which
// settles every record below the high watermarks of the topic's partitions the node owns, as
// if each had been acked, and returns once that is durable (a crash or a power cut after it
// undoes nothing). PurgeQueue calls it unless Config.Store purges the queue itself (see
// QueuePurger) or the node is a QueueWidePurger; with none, PurgeQueue is
// UnsupportedOperation.
type Purger interface {
	Purge(ctx context.Context, topic string) (int64, error)
}

// A QueueWidePurger is a Node that purges a topic's every partition, wherever it is owned,
// found by type assertion: router.Node.PurgeQueue, which purges this node's partitions and
// asks each other owner to purge its own, each answered once durable there. PurgeQueue calls
// it rather than Purger, so that a node of a cluster empties the whole queue.
type QueueWidePurger interface {
	PurgeQueue(ctx context.Context, topic string) (int64, error)
}

// A QueueCounter is a Node that counts a topic's every partition, wherever it is owned,
// found by type assertion: router.Node.QueueStatus, which asks each other owner for its
// partitions. GetQueueAttributes (and StartMessageMoveTask's count) use it rather than
// TopicStatus, which counts the node's own partitions alone.
type QueueCounter interface {
	QueueStatus(ctx context.Context, topic string) ([]router.PartitionStatus, error)
}

// A NowNacker is a Node that nacks a delivery visible again at once whatever the topic's
// Backoff, the receive counted, found by type assertion: router.Node.NackNow.
// ChangeMessageVisibility to 0 calls it; without it, a Nack with no delay, which leaves the
// message invisible for the topic's Backoff.
type NowNacker interface {
	NackNow(ctx context.Context, topic string, handle router.Handle) error
}

var (
	_ Purger          = (*router.Node)(nil)
	_ QueueWidePurger = (*router.Node)(nil)
	_ QueueCounter    = (*router.Node)(nil)
	_ NowNacker       = (*router.Node)(nil)
)

// queueStatus is the status of every partition of topic the node can count: the whole
// queue's with a QueueCounter, the node's own partitions' otherwise.
func (h *Handler) queueStatus(ctx context.Context, topic string) ([]router.PartitionStatus, error) {
	if counter, ok := h.node.(QueueCounter); ok {
		return counter.QueueStatus(ctx, topic)
	}
	return h.node.TopicStatus(topic)
}

// DefaultMaxInFlight is Config.MaxInFlight's zero value: the ReceiveMessage requests one
// client identity may have in flight at once (httpapi's bound on consumes).
const DefaultMaxInFlight = frontend.DefaultMaxInFlight

// Config shapes a Handler. BaseURL, and Queues or Store, are required; the rest may be left
// zero.
type Config struct {
	// Queues names the topic a queue name stands for; ok false means there is no such
	// queue (QueueDoesNotExist). It is asked on every request, so that a queue may come and
	// go with its topic; it must be fast and safe for concurrent use. With Queues the
	// host's queues are fixed: SQS's queue management answers UnsupportedOperation (but a
	// CreateQueue of an existing queue, without attributes, which answers its URL, and
	// PurgeQueue, which the node serves: see Purger). A queue
	// whose name ends in .fifo is a FIFO queue (see FIFO queues in the package doc): the host
	// makes its topic ordered (router.TopicConfig.Ordered).
	Queues func(name string) (topic string, ok bool)
	// Store, set instead of Queues, is the host's catalogue of queues, through which the
	// handler serves SQS's queue management (CreateQueue, DeleteQueue, ListQueues,
	// SetQueueAttributes, the tags; PurgeQueue too when the store is a QueuePurger) and keeps
	// each queue's attributes, which act (see Queue management in the package doc).
	// MemQueueStore is one in memory.
	Store QueueStore
	// AccountID is the account of the queues' ARNs (QueueArn:
	// arn:aws:sqs:<Region>:<AccountID>:<name>); empty means 000000000000.
	AccountID string
	// BaseURL is where the handler is reached, as clients see it: an absolute http or https
	// URL such as "https://broker.example.com/sqs". A queue's URL (GetQueueUrl) is BaseURL,
	// a slash and the queue's name.
	BaseURL string
	// Produce, when set, serves SendMessage and SendMessageBatch: it appends body as one
	// record of topic to the host's log (telling the node, as the host's producers always
	// do) and returns where it landed, which becomes the MessageId. Without it the two
	// actions answer UnsupportedOperation. An error it returns is answered as a node's error
	// is (router.ErrUnknownTopic is QueueDoesNotExist, router.ErrUnavailable
	// ServiceUnavailable, anything else InternalFailure). It must be safe for concurrent use:
	// besides concurrent requests, a standard queue's SendMessageBatch calls it for its
	// entries at once (a FIFO queue's, one after the other, in order).
	Produce func(ctx context.Context, topic string, body []byte) (partition int32, offset int64, err error)
	// ProduceRecord, when set, serves SendMessage and SendMessageBatch as Produce does, and
	// keeps the message's attributes: rec.Value is the body, rec.Headers one header per
	// message attribute, in order of name, its key the attribute's name and its value the
	// attribute's (a String or Number's text, a Binary's bytes), then a header
	// "AWS.SQS.DataType.<name>" holding the data type of each attribute of another type than
	// String, and "AWS.SQS.AWSTraceHeader" for a message with that system attribute (see
	// Sending in the package doc). rec.Key is the message's MessageGroupId (nil for none):
	// the host puts every record of one key into one partition of the topic (the key's hash
	// modulo the partitions, say), since a FIFO queue's order holds within a partition only.
	// A FIFO queue's record has rec.Timestamp set, the send's time on Now's clock, and a
	// header "AWS.SQS.MessageDeduplicationId": the host keeps both, from which a restarted
	// handler rebuilds the queue's deduplication window (see FIFO queues in the package doc).
	// Set Produce or ProduceRecord, not both. With Produce, which has nowhere to keep them, a
	// message with attributes or a MessageGroupId is refused (InvalidParameterValue) rather
	// than sent without them: a FIFO queue needs ProduceRecord.
	ProduceRecord func(ctx context.Context, topic string, rec router.Record) (partition int32, offset int64, err error)
	// Credentials, when set, turns on SigV4 verification of every request (see
	// Authentication in the package doc): it returns the secret access key of an access key
	// ID, ok false for a key the host does not know (InvalidClientTokenId). It is asked on
	// every request, so that keys may be added, rotated and revoked at any time; it must be
	// fast and safe for concurrent use.
	//
	// NIL MEANS NO SIGNATURE IS CHECKED: anyone who can reach the handler may call every
	// action it serves, under any access key, unless Authorize refuses.
	Credentials func(accessKeyID string) (secretAccessKey string, ok bool)
	// Region, when set with Credentials, is the one region a signature's credential scope
	// may name (the region the clients are configured with, "us-east-1", say); another is
	// SignatureDoesNotMatch. Empty means any region: the signature covers the one named. It
	// is QueueArn's region too (empty: us-east-1 there).
	Region string
	// Authorize, when set, is asked whether a request may proceed, once it has been read,
	// its signature checked (with Credentials) and decoded, and before the queue is resolved
	// or anything reaches the node; a non-nil error is answered AccessDenied (403) with the
	// error's text. Request.AccessKeyID names the signer: this is where a host gives each
	// key its queues and actions, or checks an API key or a client certificate.
	Authorize func(r *http.Request, req Request) error
	// Identity names the client a request comes from, for the bound on ReceiveMessage
	// requests in flight (an authenticated principal, say). Nil means the access key ID the
	// request was signed with when Credentials checks signatures, and the host part of the
	// request's RemoteAddr when it does not.
	Identity func(*http.Request) string
	// MaxInFlight is how many ReceiveMessage requests (long-polls held included) one
	// identity may have in flight; one more is answered RequestThrottled (403), which the
	// AWS SDKs retry with backoff. Zero means DefaultMaxInFlight; a negative value means no
	// bound.
	MaxInFlight int
	// Logger receives a line for each request answered InternalFailure. Nil means none.
	Logger *slog.Logger
	// Now is the clock of ApproximateFirstReceiveTimestamp, of the signatures' MaxClockSkew,
	// of the Date of error answers, of a queue's timestamps, of RecentWindow (one purge a
	// queue, no CreateQueue of a name deleted) and of the FIFO queues' DeduplicationWindow.
	// Nil means time.Now.
	Now func() time.Time
	// ReceiptKey is the key of the tag that binds each receipt handle to its queue (see
	// Receipt handles in the package doc). Every handler a client's handles may reach (each
	// node of a cluster behind one endpoint) must have the same key. Nil means the empty
	// key: the tag still binds a handle to its queue and refuses a changed or made-up
	// handle, but a client that knows the scheme can compute it; a secret key (32 random
	// bytes, say) makes a tag nobody without the key can compute.
	ReceiptKey []byte
	// Routes, when set, are the routes the node was given (router.Config.Routes): a handle
	// the node cannot reach (router.ErrNotLocal, router.ErrUnavailable) is then
	// ReceiptHandleIsInvalid when the routes name its partition for the topic on no node,
	// rather than the ServiceUnavailable the SDKs retry. They are asked only then. Set it
	// only where the routes never leave out a partition the topic has: during a move or a
	// failover a partition may be routed nowhere for a while, and a delete of its message
	// would then be refused for good (the message comes back once its lease lapses). A
	// single server with fixed routes (cmd/sqsd) is such a host.
	Routes router.Routes
	// MoveTasks, when set with Store, keeps the message move tasks across restarts (see
	// MoveTaskStore): New lists the tasks it kept and resumes those that were RUNNING, and
	// Close saves a running task RUNNING rather than ending it CANCELLED. Nil means the
	// tasks live in memory: a restart forgets them, and Close cancels the running ones.
	MoveTasks MoveTaskStore
}

// Request is what Config.Authorize is told of a request besides its *http.Request.
type Request struct {
	// Action is the SQS action ("ReceiveMessage"): X-Amz-Target's part after "AmazonSQS.",
	// or the query protocol's Action.
	Action string
	// Queue is the queue the request names: its QueueUrl's last path segment, or
	// GetQueueUrl's QueueName.
	Queue string
	// Body is the request's body as it arrived (the JSON, or the query protocol's form), the
	// payload a SigV4 signature covers. It is the handler's: Authorize must neither modify
	// nor keep it.
	Body []byte
	// AccessKeyID is the access key ID the request's SigV4 signature was made with, checked
	// with Config.Credentials; "" when the handler checks no signature.
	AccessKeyID string
}

// A Handler serves SQS's JSON and query protocols over a node. It is safe for concurrent use.
type Handler struct {
	node    Node
	queues  func(string) (string, bool)
	baseURL string
	produce func(context.Context, string, router.Record) (int32, int64, error)
	// keepsAttributes: produce keeps message attributes (Config.ProduceRecord).
	keepsAttributes bool
	authorize       func(*http.Request, Request) error
	verifier        *verifier // nil: no signature is checked
	identity        func(*http.Request) string
	customIdentity  bool // identity is the host's Config.Identity
	slots           *frontend.Slots
	log             *slog.Logger
	now             func() time.Time
	tags            *receiptTagger
	first           firstReceives
	routes          router.Routes
	store           QueueStore // nil: Config.Queues, and no queue management
	region, account string     // of QueueArn
	moves           moveTasks

	// When each queue was last purged and deleted, for PurgeQueueInProgress and
	// QueueDeletedRecently.
	purges, deletions recent
	// The FIFO queues' deduplication ids sent lately, and the answers of their receives
	// made with a ReceiveRequestAttemptId.
	dedup    dedupWindows
	attempts receiveAttempts
}

// New returns a handler serving SQS's JSON and query protocols over node.
func New(node Node, cfg Config) (*Handler, error) {
	switch {
	case node == nil:
		return nil, errors.New("sqsapi: nil node")
	case cfg.Queues == nil && cfg.Store == nil:
		return nil, errors.New("sqsapi: Config.Queues or Config.Store is required")
	case cfg.Queues != nil && cfg.Store != nil:
		return nil, errors.New("sqsapi: set Config.Queues or Config.Store, not both")
	case cfg.Produce != nil && cfg.ProduceRecord != nil:
		return nil, errors.New("sqsapi: set Config.Produce or Config.ProduceRecord, not both")
	}
	base, err := url.Parse(cfg.BaseURL)
	if err != nil || (base.Scheme != "http" && base.Scheme != "https") || base.Host == "" || base.RawQuery != "" || base.Fragment != "" {
		return nil, fmt.Errorf("sqsapi: Config.BaseURL %q is not an absolute http or https URL without a query", cfg.BaseURL)
	}
	h := &Handler{
		node: node, queues: cfg.Queues, baseURL: strings.TrimSuffix(cfg.BaseURL, "/"),
		produce: cfg.ProduceRecord, keepsAttributes: cfg.ProduceRecord != nil,
		authorize: cfg.Authorize, identity: cfg.Identity, customIdentity: cfg.Identity != nil, log: cfg.Logger, now: cfg.Now,
		tags: newReceiptTagger(cfg.ReceiptKey), routes: cfg.Routes,
		store: cfg.Store, region: cfg.Region, account: cfg.AccountID,
	}
	if h.region == "" {
		h.region = "us-east-1"
	}
	if h.account == "" {
		h.account = "000000000000"
	}
	if produce := cfg.Produce; produce != nil {
		h.produce = func(ctx context.Context, topic string, rec router.Record) (int32, int64, error) {
			return produce(ctx, topic, rec.Value)
		}
	}
	if cfg.Credentials != nil {
		h.verifier = newVerifier(cfg.Credentials, cfg.Region)
	}
	if h.identity == nil {
		h.identity = frontend.RemoteHost
	}
	maxFlight := cfg.MaxInFlight
	if maxFlight == 0 {
		maxFlight = DefaultMaxInFlight
	}
	h.slots = frontend.NewSlots(maxFlight)
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	if cfg.MoveTasks != nil {
		if cfg.Store == nil {
			return nil, errors.New("sqsapi: Config.MoveTasks needs Config.Store: move tasks move between the store's queues")
		}
		saved, err := cfg.MoveTasks.MoveTasks()
		if err != nil {
			return nil, fmt.Errorf("sqsapi: loading the message move tasks: %w", err)
		}
		h.moves.store = cfg.MoveTasks
		if err := h.resumeMoveTasks(saved); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// An action serves one SQS action's call.
type action func(h *Handler, c *call) error

// A call is one request of either protocol: what an action reads it from and answers it
// with.
type call struct {
	w         http.ResponseWriter
	r         *http.Request
	action    string
	body      []byte // the body as it arrived: what Authorize is handed
	json      []byte // the JSON the action decodes: body, or a query form's translation
	query     bool   // the query protocol: answered in XML
	requestID string // the query protocol's RequestId
	accessKey string // the access key ID its signature was made with; "" when none is checked
}

// decode decodes the call's input into the action's input. A query form's value of the
// wrong kind (a BinaryValue that is not base64, say) is InvalidParameterValue, as the query
// protocol has no SerializationException.
func (c *call) decode(into any) error {
	err := decode(c.json, into)
	var ae *apiError
	if c.query && errors.As(err, &ae) && ae.code == codeSerialization {
		return &apiError{code: codeInvalidParameterValue, msg: ae.msg, cause: ae.cause}
	}
	return err
}

// A reply is an action's answer, written in either protocol.
type reply interface {
	appendJSON(dst []byte) []byte
	// appendXML appends the content of the action's result element.
	appendXML(dst []byte) []byte
}

// reply writes a 200 answering the call with rep; nil answers nothing ({} in JSON, a
// response without a result element in XML).
func (c *call) reply(rep reply) (int, error) {
	if !c.query {
		if rep == nil {
			return writeJSON(c.w, emptyObject)
		}
		return writeJSON(c.w, rep.appendJSON(nil))
	}
	body := appendXMLOpen(nil, c.action, rep != nil)
	if rep != nil {
		body = rep.appendXML(body)
	}
	return writeXML(c.w, appendXMLClose(body, c.action, rep != nil, c.requestID))
}

// writeXML writes a 200 with an XML body.
func writeXML(w http.ResponseWriter, body []byte) (int, error) {
	hdr := w.Header()
	hdr.Set("Content-Type", "text/xml")
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	return w.Write(body)
}

// actions are the SQS actions the handler serves, by X-Amz-Target's action name; batch
// says a body over the bound is BatchRequestTooLong.
var actions = map[string]struct {
	serve action
	batch bool
}{
	"ReceiveMessage":               {serve: (*Handler).receiveMessage},
	"DeleteMessage":                {serve: (*Handler).deleteMessage},
	"DeleteMessageBatch":           {serve: (*Handler).deleteMessageBatch, batch: true},
	"ChangeMessageVisibility":      {serve: (*Handler).changeMessageVisibility},
	"ChangeMessageVisibilityBatch": {serve: (*Handler).changeMessageVisibilityBatch, batch: true},
	"SendMessage":                  {serve: (*Handler).sendMessage},
	"SendMessageBatch":             {serve: (*Handler).sendMessageBatch, batch: true},
	"GetQueueUrl":                  {serve: (*Handler).getQueueURL},
	"GetQueueAttributes":           {serve: (*Handler).getQueueAttributes},
	"CreateQueue":                  {serve: (*Handler).createQueue},
	"DeleteQueue":                  {serve: (*Handler).deleteQueue},
	"PurgeQueue":                   {serve: (*Handler).purgeQueue},
	"ListQueues":                   {serve: (*Handler).listQueues},
	"SetQueueAttributes":           {serve: (*Handler).setQueueAttributes},
	"TagQueue":                     {serve: (*Handler).tagQueue},
	"UntagQueue":                   {serve: (*Handler).untagQueue},
	"ListQueueTags":                {serve: (*Handler).listQueueTags},
	"StartMessageMoveTask":         {serve: (*Handler).startMessageMoveTask},
	"ListMessageMoveTasks":         {serve: (*Handler).listMessageMoveTasks},
	"CancelMessageMoveTask":        {serve: (*Handler).cancelMessageMoveTask},
	"ListDeadLetterSourceQueues":   {serve: (*Handler).listDeadLetterSourceQueues},
}

// unsupported are SQS's other actions: answered UnsupportedOperation, where an action SQS
// does not have is InvalidAction.
var unsupported = map[string]bool{
	"AddPermission": true, "RemovePermission": true,
}

// targetPrefix is what X-Amz-Target starts with for every SQS action.
const targetPrefix = "AmazonSQS."

// ServeHTTP implements http.Handler. The action is X-Amz-Target's; the path is not looked
// at (some SDKs post to the queue's URL, most to /). With Config.Credentials, the request's
// signature is checked before anything else about it is answered.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, codeMethodNotAllowed, "SQS takes POST, not "+truncate(r.Method)+".")
		return
	}
	if isQuery(r) {
		h.serveQuery(w, r)
		return
	}
	target := r.Header.Get("X-Amz-Target")
	name, prefixed := strings.CutPrefix(target, targetPrefix)
	act, served := actions[name]
	c := &call{w: w, r: r, action: name}
	var err error
	if h.verifier != nil {
		if c.body, err = readBody(w, r, act.batch); err == nil {
			err = h.authenticate(c)
		}
		if err != nil {
			h.writeErr(c, err)
			return
		}
	}
	switch {
	case target == "":
		err = fail(codeMissingAction, "The request has no X-Amz-Target header naming its action (AmazonSQS.ReceiveMessage, say).")
	case prefixed && unsupported[name]:
		err = fail(codeUnsupportedOperation, name+" is not supported by this endpoint.")
	case !prefixed || !served:
		err = fail(codeInvalidAction, "The action "+truncate(target)+" is not valid for this endpoint.")
	default:
		err = checkContentType(r)
	}
	if err == nil && h.verifier == nil {
		c.body, err = readBody(w, r, act.batch)
	}
	if err == nil {
		c.json = c.body
		err = act.serve(h, c)
	}
	if err != nil {
		h.writeErr(c, err)
	}
}

// authenticate checks the call's SigV4 signature over its body, and notes the access key
// it was signed with.
func (h *Handler) authenticate(c *call) error {
	key, err := h.verifier.verify(c.r, c.body, h.now())
	c.accessKey = key
	return err
}

// writeErr answers a failed call, logging what is the service's fault. The answer's Date
// is the handler's clock, from which the AWS SDKs measure their clock's skew when a
// signature is refused as expired.
func (h *Handler) writeErr(c *call, err error) {
	code, msg := codeOf(err)
	if code == codeInternalFailure {
		h.log.Error("sqsapi: internal failure", "action", c.action, "remote", c.r.RemoteAddr, "err", err)
	}
	c.w.Header().Set("Date", h.now().UTC().Format(http.TimeFormat))
	if c.query {
		writeXMLError(c.w, code, msg, c.requestID)
		return
	}
	writeError(c.w, code, msg)
}

// A queueRef is a queue a call resolved: its topic and, with Config.Store, its record.
type queueRef struct {
	topic   string
	rec     QueueRecord
	managed bool // rec is the store's
	fifo    bool // a FIFO queue: its name ends in .fifo
}

// lookup resolves queue name through Config.Store or Config.Queues.
func (h *Handler) lookup(name string) (queueRef, bool) {
	if h.store != nil {
		rec, ok := h.store.Queue(name)
		return queueRef{topic: rec.Topic, rec: rec, managed: true, fifo: isFIFOName(name)}, ok
	}
	topic, ok := h.queues(name)
	return queueRef{topic: topic, fifo: isFIFOName(name)}, ok
}

// allow asks Config.Authorize about a call naming queue ("" for none).
func (h *Handler) allow(c *call, queue string) error {
	if h.authorize != nil {
		if err := h.authorize(c.r, Request{Action: c.action, Queue: queue, Body: c.body, AccessKeyID: c.accessKey}); err != nil {
			return fail(codeAccessDenied, err.Error())
		}
	}
	return nil
}

// open authorizes a call naming queue and resolves the queue.
func (h *Handler) open(c *call, queue string) (queueRef, error) {
	if err := h.allow(c, queue); err != nil {
		return queueRef{}, err
	}
	ref, ok := h.lookup(queue)
	if !ok {
		return queueRef{}, fail(codeQueueDoesNotExist, "The specified queue does not exist.")
	}
	return ref, nil
}

// openURL is open for a call naming its queue by QueueUrl, answering its topic.
func (h *Handler) openURL(c *call, queueURL *string) (string, error) {
	_, ref, err := h.openRef(c, queueURL)
	return ref.topic, err
}

// openQueue is openURL that returns the queue's name too.
func (h *Handler) openQueue(c *call, queueURL *string) (queue, topic string, err error) {
	queue, ref, err := h.openRef(c, queueURL)
	return queue, ref.topic, err
}

// openRef is open for a call naming its queue by QueueUrl.
func (h *Handler) openRef(c *call, queueURL *string) (string, queueRef, error) {
	queue, err := queueName(queueURL)
	if err != nil {
		return "", queueRef{}, err
	}
	ref, err := h.open(c, queue)
	return queue, ref, err
}
