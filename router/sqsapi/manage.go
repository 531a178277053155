package sqsapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Queue management through Config.Store: CreateQueue, DeleteQueue, ListQueues,
// SetQueueAttributes, TagQueue, UntagQueue, ListQueueTags and PurgeQueue.

// A queueAttribute is an attribute a queue keeps: its default and the range of its values
// (integers all).
type queueAttribute struct {
	name    string
	def     int64
	lo, hi  int64
	refusal string // non-empty: only def is taken, and another value is refused so
}

// keptAttributes are the attributes a queue keeps, which CreateQueue and SetQueueAttributes
// set, with SQS's defaults and ranges.
var keptAttributes = []queueAttribute{
	// 0 would be a lease of no time: refused, as a receive's VisibilityTimeout of 0 is.
	{name: "VisibilityTimeout", def: 30, lo: 1, hi: MaxVisibilitySeconds},
	{name: "DelaySeconds", def: 0, lo: 0, hi: MaxDelaySeconds},
	{name: "MaximumMessageSize", def: MaxMessageBytes, lo: 1024, hi: MaxMessageBytes},
	{name: "MessageRetentionPeriod", def: 345600, lo: 60, hi: 1209600},
	{name: "ReceiveMessageWaitTimeSeconds", def: 0, lo: 0, hi: MaxWaitSeconds},
}

// unsupportedAttributes are SQS's settable attributes this endpoint does not keep: setting
// one is InvalidAttributeValue rather than a setting silently without effect.
var unsupportedAttributes = setOf(
	"Policy", "RedriveAllowPolicy", "KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds",
	"SqsManagedSseEnabled",
)

// defaultAttributes are a new queue's attributes (fifo: a FIFO queue's).
func defaultAttributes(fifo bool) map[string]string {
	m := make(map[string]string, len(keptAttributes)+4)
	for _, a := range keptAttributes {
		m[a.name] = strconv.FormatInt(a.def, 10)
	}
	if fifo {
		maps.Copy(m, fifoDefaults())
	}
	return m
}

// checkAttributes checks the attributes a CreateQueue (create) or SetQueueAttributes sets
// on a queue (fifo: a FIFO queue) and returns them written out as GetQueueAttributes
// answers them. A name SQS does not have, or whose attribute cannot be set, is
// InvalidAttributeName; a value out of range, or one of an attribute this endpoint does not
// keep, InvalidAttributeValue.
func checkAttributes(in map[string]string, fifo, create bool) (map[string]string, error) {
	out := make(map[string]string, len(in))
	for _, name := range slices.Sorted(maps.Keys(in)) {
		v := in[name]
		i := slices.IndexFunc(keptAttributes, func(a queueAttribute) bool { return a.name == name })
		if _, ok := fifoAttributeValues[name]; ok {
			written, err := checkFIFOAttribute(name, v, fifo, create)
			if err != nil {
				return nil, err
			}
			out[name] = written
			continue
		}
		switch {
		case unsupportedAttributes[name]:
			return nil, fail(codeInvalidAttributeValue, "Invalid value for the parameter "+name+": the attribute is not supported by this endpoint.")
		case name == "RedrivePolicy":
			if v == "" { // none: a policy set is removed
				out[name] = ""
				continue
			}
			p, err := ParseRedrivePolicy(v)
			if err != nil {
				return nil, invalidValue(name, strconv.Quote(truncate(v)), err.Error()+".")
			}
			out[name] = p.String()
			continue
		case i < 0:
			return nil, fail(codeInvalidAttributeName, "Unknown Attribute "+strconv.Quote(truncate(name))+".")
		}
		a := keptAttributes[i]
		n, err := strconv.ParseInt(v, 10, 64)
		switch {
		case err != nil || n < a.lo || n > a.hi:
			return nil, fail(codeInvalidAttributeValue, fmt.Sprintf("Invalid value for the parameter %s: %s is not an integer from %d to %d.", name, strconv.Quote(truncate(v)), a.lo, a.hi))
		case a.refusal != "" && n != a.def:
			return nil, fail(codeInvalidAttributeValue, "Invalid value for the parameter "+name+". "+a.refusal)
		}
		out[name] = strconv.FormatInt(n, 10)
	}
	return out, nil
}

// setAttributes sets attrs, checked, in rec's attributes: a RedrivePolicy of "" removes
// the queue's.
func setAttributes(rec *QueueRecord, attrs map[string]string) {
	maps.Copy(rec.Attributes, attrs)
	if rec.Attributes["RedrivePolicy"] == "" {
		delete(rec.Attributes, "RedrivePolicy")
	}
}

// attribute reads a kept attribute of a queue's record as an integer; absent or not one,
// its default.
func (r *queueRef) attribute(name string, def int64) int64 {
	if !r.managed {
		return def
	}
	if n, err := strconv.ParseInt(r.rec.Attributes[name], 10, 64); err == nil {
		return n
	}
	return def
}

// queueURL is the URL of queue name.
func (h *Handler) queueURL(name string) string { return h.baseURL + "/" + name }

// queueArn is the ARN of queue name.
func (h *Handler) queueArn(name string) string {
	return "arn:aws:sqs:" + h.region + ":" + h.account + ":" + name
}

// needStore refuses a management action without Config.Store.
func (h *Handler) needStore(c *call) error {
	if h.store == nil {
		return fail(codeUnsupportedOperation, c.action+" is not supported by this endpoint: its queues are the host's (Config.Queues).")
	}
	return nil
}

// The bounds of tags, as SQS has them.
const (
	maxTags        = 50
	maxTagKey      = 128
	maxTagValue    = 256
	maxListResults = 1000
)

// checkTags checks tags to set: keys of 1 to 128 characters and values of up to 256, none
// beginning with "aws:" (AWS's own), at most maxTags with those the queue has.
func checkTags(tags map[string]string, have map[string]string) error {
	n := len(have)
	for k, v := range tags {
		switch {
		case k == "" || len(k) > maxTagKey || !utf8Text(k):
			return invalidValue("Tags", strconv.Quote(truncate(k)), fmt.Sprintf("A tag key is 1 to %d characters.", maxTagKey))
		case strings.HasPrefix(strings.ToLower(k), "aws:"):
			return invalidValue("Tags", strconv.Quote(truncate(k)), "A tag key may not begin with aws:, which is AWS's own.")
		case len(v) > maxTagValue || !utf8Text(v):
			return invalidValue("Tags", strconv.Quote(truncate(v)), fmt.Sprintf("A tag value is up to %d characters.", maxTagValue))
		}
		if _, ok := have[k]; !ok {
			n++
		}
	}
	if n > maxTags {
		return invalidValue("Tags", strconv.Itoa(n), fmt.Sprintf("A queue has at most %d tags.", maxTags))
	}
	return nil
}

func utf8Text(s string) bool { _, ok := invalidCharacter(s); return ok }

// createQueueInput is CreateQueue's body.
type createQueueInput struct {
	QueueName  *string
	Attributes map[string]string
	Tags       map[string]string `json:"tags"`
}

// createQueue serves CreateQueue: a new queue with the attributes given (the others'
// defaults) and the tags, through Config.Store; for a queue that exists, its URL when every
// attribute given has the queue's value, and QueueNameExists when one does not, changing
// nothing (tags included). Without a store, an existing queue's URL when no attribute is
// given.
func (h *Handler) createQueue(c *call) error {
	var in createQueueInput
	if err := c.decode(&in); err != nil {
		return err
	}
	name, err := queueNameParam(in.QueueName)
	if err != nil {
		return err
	}
	if err := checkQueueType(name, in.Attributes); err != nil {
		return err
	}
	fifo := isFIFOName(name)
	attrs, err := checkAttributes(in.Attributes, fifo, true)
	if err != nil {
		return err
	}
	if fifo {
		all := defaultAttributes(true)
		maps.Copy(all, attrs)
		if err := checkThroughput(all); err != nil {
			return err
		}
	}
	if err := checkTags(in.Tags, nil); err != nil {
		return err
	}
	if err := h.allow(c, name); err != nil {
		return err
	}
	if h.store != nil {
		if err := h.checkRedrive(name, attrs); err != nil {
			return err
		}
	}
	if h.store == nil {
		// A FIFO queue of the host's is one whose FIFO attributes are SQS's defaults: a
		// client that creates it as it expects it (FifoQueue=true) gets its URL.
		same := true
		for k, v := range attrs {
			same = same && fifo && fifoDefaults()[k] == v
		}
		if _, ok := h.lookup(name); !ok || !same || len(in.Tags) > 0 {
			return h.needStore(c)
		}
		c.reply(queueURLReply(h.queueURL(name)))
		return nil
	}
	_, err = h.store.PutQueue(c.r.Context(), name, func(rec QueueRecord, exists bool) (QueueRecord, error) {
		if exists {
			for k, v := range attrs {
				if have, ok := rec.Attributes[k]; !ok && v != defaultAttributes(fifo)[k] || ok && have != v {
					return QueueRecord{}, fail(codeQueueNameExists, "A queue already exists with the same name and a different value for attribute "+k+".")
				}
			}
			return rec, nil
		}
		now := h.now()
		if h.deletions.within(name, now) {
			return QueueRecord{}, fail(codeQueueDeletedRecently, "You must wait 60 seconds after deleting a queue before you can create another with the same name.")
		}
		rec = QueueRecord{Attributes: defaultAttributes(fifo), Tags: maps.Clone(in.Tags), Created: now, Modified: now}
		setAttributes(&rec, attrs)
		if rec.Tags == nil {
			rec.Tags = map[string]string{}
		}
		return rec, nil
	})
	if err != nil {
		return err
	}
	c.reply(queueURLReply(h.queueURL(name)))
	return nil
}

// queueURLInput is the body of the actions that name a queue only.
type queueURLInput struct{ QueueUrl *string }

// named decodes a body naming a queue by QueueUrl, authorizes the call and resolves the
// queue in Config.Store.
func (h *Handler) named(c *call) (string, queueRef, error) {
	var in queueURLInput
	if err := c.decode(&in); err != nil {
		return "", queueRef{}, err
	}
	if err := h.needStore(c); err != nil {
		return "", queueRef{}, err
	}
	return h.openRef(c, in.QueueUrl)
}

// deleteQueue serves DeleteQueue through Config.Store.
func (h *Handler) deleteQueue(c *call) error {
	name, _, err := h.named(c)
	if err != nil {
		return err
	}
	// Marked before the store deletes, so that no CreateQueue slips in between; undone when
	// the queue is still there.
	at := h.now()
	prev, had := h.deletions.set(name, at)
	err = h.store.DeleteQueue(c.r.Context(), name)
	if _, still := h.store.Queue(name); !still {
		h.dedup.forget(name) // a queue created under the name starts with no ids sent
	}
	if err != nil {
		if _, still := h.store.Queue(name); still || errors.Is(err, ErrQueueNotFound) {
			h.deletions.undo(name, at, prev, had)
		}
		if errors.Is(err, ErrQueueNotFound) {
			return fail(codeQueueDoesNotExist, "The specified queue does not exist.")
		}
		return err
	}
	c.reply(nil)
	return nil
}

// purgeQueue serves PurgeQueue: through Config.Store when it is a QueuePurger that purges,
// and otherwise through the node: its PurgeQueue when it is a QueueWidePurger
// (router.Node.PurgeQueue: every partition's messages below its high watermark settled,
// wherever it is owned, durably when it returns), its Purge otherwise (the partitions it
// owns).
func (h *Handler) purgeQueue(c *call) error {
	var in queueURLInput
	if err := c.decode(&in); err != nil {
		return err
	}
	name, ref, err := h.openRef(c, in.QueueUrl)
	if err != nil {
		return err
	}
	purger, stores := h.store.(QueuePurger)
	nodePurge, nodePurges := h.nodePurge()
	if !stores && !nodePurges {
		return unsupportedPurge()
	}
	at := h.now()
	if !h.purges.claim(name, at) {
		return fail(codePurgeQueueInProgress, "Only one PurgeQueue operation on "+name+" is allowed every 60 seconds.")
	}
	err = errors.ErrUnsupported
	if stores {
		err = purger.PurgeQueue(c.r.Context(), name, ref.rec)
	}
	if errors.Is(err, errors.ErrUnsupported) && nodePurges {
		_, err = nodePurge(c.r.Context(), ref.topic)
	}
	if err != nil {
		h.purges.undo(name, at, time.Time{}, false) // no purge: another may come at once
		if errors.Is(err, errors.ErrUnsupported) {
			return unsupportedPurge()
		}
		return err
	}
	c.reply(nil)
	return nil
}

// nodePurge returns the node's purge of a whole topic: PurgeQueue when it is a
// QueueWidePurger, Purge when it is a Purger; ok is false when it is neither.
func (h *Handler) nodePurge() (purge func(ctx context.Context, topic string) (int64, error), ok bool) {
	if p, ok := h.node.(QueueWidePurger); ok {
		return p.PurgeQueue, true
	}
	if p, ok := h.node.(Purger); ok {
		return p.Purge, true
	}
	return nil, false
}

func unsupportedPurge() error {
	return fail(codeUnsupportedOperation, "PurgeQueue is not supported by this endpoint: neither the host's queue store nor its node can empty a queue's topic.")
}

// listQueuesInput is ListQueues' body.
type listQueuesInput struct {
	QueueNamePrefix *string
	MaxResults      *int64
	NextToken       *string
}

// listQueuesReply answers ListQueues.
type listQueuesReply struct {
	QueueUrls []string `json:"QueueUrls,omitempty"`
	NextToken string   `json:"NextToken,omitempty"`
}

func (l *listQueuesReply) appendJSON(dst []byte) []byte {
	resp, _ := json.Marshal(l)
	return append(dst, resp...)
}

func (l *listQueuesReply) appendXML(dst []byte) []byte {
	for _, u := range l.QueueUrls {
		dst = appendXMLElement(dst, "QueueUrl", u)
	}
	if l.NextToken != "" {
		dst = appendXMLElement(dst, "NextToken", l.NextToken)
	}
	return dst
}

// listQueues serves ListQueues: the URLs of the queues whose names begin with
// QueueNamePrefix, in order of name; without MaxResults up to 1000 of them, with it
// MaxResults (1 to 1000) and a NextToken when there are more. A NextToken names the last
// queue answered: the next page begins after it.
func (h *Handler) listQueues(c *call) error {
	var in listQueuesInput
	if err := c.decode(&in); err != nil {
		return err
	}
	if err := h.needStore(c); err != nil {
		return err
	}
	prefix := ""
	if in.QueueNamePrefix != nil {
		prefix = *in.QueueNamePrefix
		if len(prefix) > maxQueueName {
			return invalidValue("QueueNamePrefix", strconv.Quote(truncate(prefix)), fmt.Sprintf("A queue name prefix is up to %d characters.", maxQueueName))
		}
	}
	limit, err := integer("MaxResults", in.MaxResults, 1, maxListResults, maxListResults)
	if err != nil {
		return err
	}
	after := ""
	if in.NextToken != nil && *in.NextToken != "" {
		if in.MaxResults == nil {
			return invalidValue("NextToken", "(set)", "NextToken is taken with MaxResults only.")
		}
		raw, err := base64.RawURLEncoding.DecodeString(*in.NextToken)
		if err != nil || !strings.HasPrefix(string(raw), prefix+"\x00") {
			return invalidValue("NextToken", strconv.Quote(truncate(*in.NextToken)), "Invalid NextToken value.")
		}
		after = string(raw[len(prefix)+1:])
	}
	if err := h.allow(c, ""); err != nil {
		return err
	}
	names := h.store.ListQueues(prefix)
	start, _ := slices.BinarySearch(names, after)
	if start < len(names) && after != "" && names[start] == after {
		start++
	}
	names = names[start:]
	var rep listQueuesReply
	if len(names) > int(limit) {
		names = names[:limit]
		if in.MaxResults != nil {
			rep.NextToken = base64.RawURLEncoding.EncodeToString([]byte(prefix + "\x00" + names[len(names)-1]))
		}
	}
	for _, n := range names {
		rep.QueueUrls = append(rep.QueueUrls, h.queueURL(n))
	}
	c.reply(&rep)
	return nil
}

// setQueueAttributesInput is SetQueueAttributes' body.
type setQueueAttributesInput struct {
	QueueUrl   *string
	Attributes map[string]string
}

// setQueueAttributes serves SetQueueAttributes through Config.Store: all of them, or none.
func (h *Handler) setQueueAttributes(c *call) error {
	var in setQueueAttributesInput
	if err := c.decode(&in); err != nil {
		return err
	}
	if err := h.needStore(c); err != nil {
		return err
	}
	if in.Attributes == nil {
		return missing("Attributes")
	}
	// The queue's type is its name's (see isFIFOName), known before it is resolved.
	named, err := queueName(in.QueueUrl)
	if err != nil {
		return err
	}
	fifo := isFIFOName(named)
	attrs, err := checkAttributes(in.Attributes, fifo, false)
	if err != nil {
		return err
	}
	name, _, err := h.openRef(c, in.QueueUrl)
	if err != nil {
		return err
	}
	if err := h.checkRedrive(name, attrs); err != nil {
		return err
	}
	if err := h.change(c, name, func(rec *QueueRecord) error {
		setAttributes(rec, attrs)
		if fifo {
			if err := checkThroughput(rec.Attributes); err != nil {
				return err
			}
		}
		rec.Modified = h.now()
		return nil
	}); err != nil {
		return err
	}
	c.reply(nil)
	return nil
}

// change changes queue name's record in Config.Store with fn, on a copy of its own; a queue
// gone meanwhile is QueueDoesNotExist.
func (h *Handler) change(c *call, name string, fn func(rec *QueueRecord) error) error {
	_, err := h.store.PutQueue(c.r.Context(), name, func(rec QueueRecord, exists bool) (QueueRecord, error) {
		if !exists {
			return QueueRecord{}, fail(codeQueueDoesNotExist, "The specified queue does not exist.")
		}
		rec = cloneRecord(rec)
		if err := fn(&rec); err != nil {
			return QueueRecord{}, err
		}
		return rec, nil
	})
	return err
}

// tagQueueInput is TagQueue's body.
type tagQueueInput struct {
	QueueUrl *string
	Tags     map[string]string
}

// tagQueue serves TagQueue: the tags given set, the others kept.
func (h *Handler) tagQueue(c *call) error {
	var in tagQueueInput
	if err := c.decode(&in); err != nil {
		return err
	}
	if err := h.needStore(c); err != nil {
		return err
	}
	if len(in.Tags) == 0 {
		return missing("Tags")
	}
	if err := checkTags(in.Tags, nil); err != nil {
		return err
	}
	name, _, err := h.openRef(c, in.QueueUrl)
	if err != nil {
		return err
	}
	if err := h.change(c, name, func(rec *QueueRecord) error {
		if err := checkTags(in.Tags, rec.Tags); err != nil {
			return err
		}
		maps.Copy(rec.Tags, in.Tags)
		return nil
	}); err != nil {
		return err
	}
	c.reply(nil)
	return nil
}

// untagQueueInput is UntagQueue's body.
type untagQueueInput struct {
	QueueUrl *string
	TagKeys  []string
}

// untagQueue serves UntagQueue: the tags named removed (a key the queue has not is no error).
func (h *Handler) untagQueue(c *call) error {
	var in untagQueueInput
	if err := c.decode(&in); err != nil {
		return err
	}
	if err := h.needStore(c); err != nil {
		return err
	}
	if len(in.TagKeys) == 0 {
		return missing("TagKeys")
	}
	name, _, err := h.openRef(c, in.QueueUrl)
	if err != nil {
		return err
	}
	if err := h.change(c, name, func(rec *QueueRecord) error {
		for _, k := range in.TagKeys {
			delete(rec.Tags, k)
		}
		return nil
	}); err != nil {
		return err
	}
	c.reply(nil)
	return nil
}

// listQueueTags serves ListQueueTags.
func (h *Handler) listQueueTags(c *call) error {
	_, ref, err := h.named(c)
	if err != nil {
		return err
	}
	c.reply(tagsReply(ref.rec.Tags))
	return nil
}

// unixSeconds writes t as SQS's timestamps of queues: seconds since the epoch.
func unixSeconds(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
