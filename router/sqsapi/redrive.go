package sqsapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"narad.dev/consume/router"
)

// Redrive: a queue's RedrivePolicy (kept in Config.Store's record), the dead-letter queue a
// host fills with Handler.DeadLetter from router.Config.OnQuarantine, and the message move
// tasks that bring messages back (movetask.go).

// MaxReceiveCountLimit is the largest maxReceiveCount of a RedrivePolicy, as SQS has it.
const MaxReceiveCountLimit = 1000

// deadLetterSourceHeader is the header of a record Handler.DeadLetter wrote into a
// dead-letter queue that names the queue it came from, where a move task with no
// destination puts it back. Its key begins with internalPrefix: no receive answers it.
const deadLetterSourceHeader = internalPrefix + "DeadLetterSourceQueue"

// A RedrivePolicy is a queue's RedrivePolicy attribute: after MaxReceiveCount receives
// without a delete, a message moves to the dead-letter queue DeadLetterTargetArn names.
type RedrivePolicy struct {
	MaxReceiveCount     int    // 1 to MaxReceiveCountLimit
	DeadLetterTargetArn string // arn:aws:sqs:<region>:<account>:<queue name>
}

// String is the policy as GetQueueAttributes answers it, and as a QueueRecord keeps it:
// {"deadLetterTargetArn":"arn:...","maxReceiveCount":5}.
func (p RedrivePolicy) String() string {
	b, _ := json.Marshal(struct {
		DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		MaxReceiveCount     int    `json:"maxReceiveCount"`
	}{p.DeadLetterTargetArn, p.MaxReceiveCount})
	return string(b)
}

// ParseRedrivePolicy parses a RedrivePolicy attribute as SQS takes it: a JSON object of
// deadLetterTargetArn (an SQS queue's ARN) and maxReceiveCount (1 to MaxReceiveCountLimit,
// a number or a string of one), and nothing else. It does not check that the queue exists.
func ParseRedrivePolicy(s string) (RedrivePolicy, error) {
	var raw map[string]json.RawMessage
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil || dec.More() {
		return RedrivePolicy{}, errors.New("not a JSON object")
	}
	var p RedrivePolicy
	for k, v := range raw {
		switch k {
		case "deadLetterTargetArn":
			if err := json.Unmarshal(v, &p.DeadLetterTargetArn); err != nil {
				return RedrivePolicy{}, errors.New("deadLetterTargetArn is not a string")
			}
		case "maxReceiveCount":
			text := string(bytes.Trim(v, `"`))
			n, err := strconv.Atoi(text)
			if err != nil || n < 1 || n > MaxReceiveCountLimit || text != strconv.Itoa(n) {
				return RedrivePolicy{}, fmt.Errorf("maxReceiveCount is not an integer from 1 to %d", MaxReceiveCountLimit)
			}
			p.MaxReceiveCount = n
		default:
			return RedrivePolicy{}, fmt.Errorf("unknown member %s", strconv.Quote(truncate(k)))
		}
	}
	switch {
	case p.DeadLetterTargetArn == "":
		return RedrivePolicy{}, errors.New("no deadLetterTargetArn")
	case p.MaxReceiveCount == 0:
		return RedrivePolicy{}, errors.New("no maxReceiveCount")
	}
	if _, _, _, ok := splitQueueArn(p.DeadLetterTargetArn); !ok {
		return RedrivePolicy{}, errors.New("deadLetterTargetArn is not an SQS queue's ARN")
	}
	return p, nil
}

// redrivePolicyOf returns a queue record's RedrivePolicy, ok false when it has none (or
// one that does not parse, which the handler never stores).
func redrivePolicyOf(rec QueueRecord) (RedrivePolicy, bool) {
	s, ok := rec.Attributes["RedrivePolicy"]
	if !ok {
		return RedrivePolicy{}, false
	}
	p, err := ParseRedrivePolicy(s)
	return p, err == nil
}

// MaxDeliveries is the router.TopicConfig.MaxDeliveries of a queue's topic: its
// RedrivePolicy's maxReceiveCount, or 0 (unlimited) when it has none. A host's
// router.Config.Topic answers it for the queue's topic (TopicConfig does), and its QueueStore calls
// router.Node.ReloadTopic when a record's RedrivePolicy changes, so that the node
// quarantines a message after that many receives and router.Config.OnQuarantine hands it
// to DeadLetter.
func MaxDeliveries(rec QueueRecord) int {
	p, _ := redrivePolicyOf(rec)
	return p.MaxReceiveCount
}

// splitQueueArn splits arn:aws:sqs:<region>:<account>:<name>.
func splitQueueArn(arn string) (region, account, name string, ok bool) {
	parts := strings.Split(arn, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[1] == "" || parts[2] != "sqs" || checkQueueName(parts[5]) != nil {
		return "", "", "", false
	}
	return parts[3], parts[4], parts[5], true
}

// arnQueue is the name of the queue an ARN names on this endpoint (its region and
// account), ok false for another's or for what is no queue's ARN.
func (h *Handler) arnQueue(arn string) (string, bool) {
	region, account, name, ok := splitQueueArn(arn)
	if !ok || region != h.region || account != h.account {
		return "", false
	}
	return name, true
}

// checkRedrive checks the RedrivePolicy among the attributes a CreateQueue or
// SetQueueAttributes of queue sets: its dead-letter queue must be a queue of this
// endpoint's, other than queue, and the handler must be able to keep a moved message's
// attributes (Config.ProduceRecord). "" (no policy) is taken.
func (h *Handler) checkRedrive(queue string, attrs map[string]string) error {
	s, ok := attrs["RedrivePolicy"]
	if !ok || s == "" {
		return nil
	}
	if !h.keepsAttributes {
		return fail(codeInvalidAttributeValue, "Invalid value for the parameter RedrivePolicy: dead-letter queues need the host's Config.ProduceRecord, which this endpoint has not.")
	}
	p, _ := ParseRedrivePolicy(s) // checkAttributes parsed it
	dlq, ok := h.arnQueue(p.DeadLetterTargetArn)
	if ok {
		_, ok = h.store.Queue(dlq)
	}
	switch {
	case !ok:
		return invalidValue("RedrivePolicy", strconv.Quote(truncate(s)), "Dead letter target does not exist.")
	case dlq == queue:
		return invalidValue("RedrivePolicy", strconv.Quote(truncate(s)), "A queue cannot be its own dead letter target.")
	case isFIFOName(dlq) != isFIFOName(queue):
		// A FIFO queue's dead letters keep their groups in a FIFO queue; a standard queue's
		// have no order to keep.
		return invalidValue("RedrivePolicy", strconv.Quote(truncate(s)), "Dead-letter target must be the same type of queue as the source: FIFO for a FIFO queue, standard for a standard one.")
	}
	return nil
}

// ErrNoDeadLetterQueue is what DeadLetter returns when the dead-letter queue a queue's
// RedrivePolicy names does not exist (it was deleted): the record stays quarantined.
var ErrNoDeadLetterQueue = errors.New("sqsapi: the dead-letter queue does not exist")

// DeadLetter moves rec, a record of topic that the node quarantined after the
// RedrivePolicy's maxReceiveCount receives (router.Config.OnQuarantine tells the host,
// which reads the record from its log), into the dead-letter queue the policy names: the
// record is produced into that queue's topic through Config.ProduceRecord, its key, value,
// timestamp and headers (the message's attributes) as they are, with one header more that
// names the queue it came from (for a move task to put it back). It returns the dead-letter
// queue's name, or "" when topic is no queue's of Config.Store or its queue has no
// RedrivePolicy (nothing is done). ErrNoDeadLetterQueue when the dead-letter queue is gone;
// a produce's error as it is.
//
// The source's record stays in the node's quarantine (router.Node.Quarantined) until the
// host settles it with router.Node.Discard, after DeadLetter returned a queue's name (copy
// first, then discard: a crash between the two leaves it quarantined, to be copied again).
// DeadLetter finds the queue
// of topic by listing the store's queues: a cost per quarantined message, not per message.
// It is safe for concurrent use.
func (h *Handler) DeadLetter(ctx context.Context, topic string, rec router.Record) (string, error) {
	if h.store == nil {
		return "", nil
	}
	var source string
	var srcRec QueueRecord
	for _, name := range h.store.ListQueues("") {
		if r, ok := h.store.Queue(name); ok && r.Topic == topic {
			source, srcRec = name, r
			break
		}
	}
	p, ok := redrivePolicyOf(srcRec)
	if source == "" || !ok {
		return "", nil
	}
	dlq, ok := h.arnQueue(p.DeadLetterTargetArn)
	var dlqRec QueueRecord
	if ok {
		dlqRec, ok = h.store.Queue(dlq)
	}
	if !ok {
		return "", fmt.Errorf("%w: %s (the RedrivePolicy of %s)", ErrNoDeadLetterQueue, p.DeadLetterTargetArn, source)
	}
	moved := rec
	moved.Headers = withHeader(rec.Headers, deadLetterSourceHeader, source)
	if _, _, err := h.produce(ctx, dlqRec.Topic, moved); err != nil {
		return "", err
	}
	return dlq, nil
}

// withHeader returns headers without key's, and key: value appended; "" drops key only.
func withHeader(headers []router.Header, key, value string) []router.Header {
	out := make([]router.Header, 0, len(headers)+1)
	for _, hd := range headers {
		if hd.Key != key {
			out = append(out, hd)
		}
	}
	if value != "" {
		out = append(out, router.Header{Key: key, Value: []byte(value)})
	}
	return out
}

// headerValue returns the value of key's last header.
func headerValue(headers []router.Header, key string) (string, bool) {
	for i := len(headers) - 1; i >= 0; i-- {
		if headers[i].Key == key {
			return string(headers[i].Value), true
		}
	}
	return "", false
}

// listDeadLetterSourceQueuesInput is ListDeadLetterSourceQueues' body.
type listDeadLetterSourceQueuesInput struct {
	QueueUrl   *string
	MaxResults *int64
	NextToken  *string
}

// sourceQueuesReply answers ListDeadLetterSourceQueues: its member is queueUrls, in lower
// case, as SQS's model has it.
type sourceQueuesReply struct {
	QueueUrls []string `json:"queueUrls"`
	NextToken string   `json:"NextToken,omitempty"`
}

func (r *sourceQueuesReply) appendJSON(dst []byte) []byte {
	resp, _ := json.Marshal(r)
	return append(dst, resp...)
}

func (r *sourceQueuesReply) appendXML(dst []byte) []byte {
	for _, u := range r.QueueUrls {
		dst = appendXMLElement(dst, "QueueUrl", u)
	}
	if r.NextToken != "" {
		dst = appendXMLElement(dst, "NextToken", r.NextToken)
	}
	return dst
}

// listDeadLetterSourceQueues serves ListDeadLetterSourceQueues: the URLs of the queues whose
// RedrivePolicy names the queue, in order of name, paged as ListQueues is.
func (h *Handler) listDeadLetterSourceQueues(c *call) error {
	var in listDeadLetterSourceQueuesInput
	if err := c.decode(&in); err != nil {
		return err
	}
	if err := h.needStore(c); err != nil {
		return err
	}
	limit, err := integer("MaxResults", in.MaxResults, 1, maxListResults, maxListResults)
	if err != nil {
		return err
	}
	after := ""
	if in.NextToken != nil && *in.NextToken != "" {
		raw, err := base64.RawURLEncoding.DecodeString(*in.NextToken)
		if err != nil || in.MaxResults == nil || checkQueueName(string(raw)) != nil {
			return invalidValue("NextToken", strconv.Quote(truncate(*in.NextToken)), "Invalid NextToken value.")
		}
		after = string(raw)
	}
	queue, _, err := h.openRef(c, in.QueueUrl)
	if err != nil {
		return err
	}
	arn := h.queueArn(queue)
	rep := &sourceQueuesReply{QueueUrls: []string{}}
	for _, name := range h.store.ListQueues("") {
		if name <= after {
			continue
		}
		rec, ok := h.store.Queue(name)
		if p, has := redrivePolicyOf(rec); !ok || !has || p.DeadLetterTargetArn != arn {
			continue
		}
		if len(rep.QueueUrls) == int(limit) {
			if in.MaxResults != nil {
				last := rep.QueueUrls[len(rep.QueueUrls)-1]
				rep.NextToken = base64.RawURLEncoding.EncodeToString([]byte(last[strings.LastIndexByte(last, '/')+1:]))
			}
			break
		}
		rep.QueueUrls = append(rep.QueueUrls, h.queueURL(name))
	}
	c.reply(rep)
	return nil
}
