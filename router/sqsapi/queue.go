package sqsapi

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	"narad.dev/consume/router"
)

// getQueueURLInput is GetQueueUrl's body.
type getQueueURLInput struct {
	QueueName              *string
	QueueOwnerAWSAccountId *string // ignored: the host's Queues resolves every name
}

// getQueueURL serves GetQueueUrl: BaseURL/name for a queue Config.Queues knows.
func (h *Handler) getQueueURL(c *call) error {
	var in getQueueURLInput
	if err := c.decode(&in); err != nil {
		return err
	}
	if in.QueueName == nil {
		return missing("QueueName")
	}
	name := *in.QueueName
	if err := checkQueueName(name); err != nil {
		return err
	}
	if _, err := h.open(c, name); err != nil {
		return err
	}
	c.reply(queueURLReply(h.baseURL + "/" + name))
	return nil
}

// getQueueAttributesInput is GetQueueAttributes' body.
type getQueueAttributesInput struct {
	QueueUrl       *string
	AttributeNames []string
}

// The queue attributes the handler serves, by bit (queueAttributes[i] is bit i).
const (
	attrMessages = 1 << iota
	attrNotVisible
	attrDelayed
)

var queueAttributes = []string{"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed"}

// knownQueueAttributeNames are the queue attributes SQS knows: any other is
// InvalidAttributeName. Those not in queueAttributes are accepted and not returned.
var knownQueueAttributeNames = setOf(
	"Policy", "VisibilityTimeout", "MaximumMessageSize", "MessageRetentionPeriod",
	"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "CreatedTimestamp",
	"LastModifiedTimestamp", "QueueArn", "ApproximateNumberOfMessagesDelayed", "DelaySeconds",
	"ReceiveMessageWaitTimeSeconds", "RedrivePolicy", "FifoQueue", "ContentBasedDeduplication",
	"KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "DeduplicationScope", "FifoThroughputLimit",
	"RedriveAllowPolicy", "SqsManagedSseEnabled",
)

// getQueueAttributes serves GetQueueAttributes from the node's TopicStatus: the counts of
// the topic's partitions this node owns, summed.
func (h *Handler) getQueueAttributes(c *call) error {
	var in getQueueAttributesInput
	if err := c.decode(&in); err != nil {
		return err
	}
	want, err := attributeNames("AttributeNames", in.AttributeNames, knownQueueAttributeNames, queueAttributes)
	if err != nil {
		return err
	}
	topic, err := h.openURL(c, in.QueueUrl)
	if err != nil {
		return err
	}
	status, err := h.node.TopicStatus(topic)
	if err != nil {
		return err
	}
	counts := queueCounts(status)
	attrs := map[string]string{}
	for i, name := range queueAttributes {
		if want&(1<<i) != 0 {
			attrs[name] = strconv.FormatInt(counts[i], 10)
		}
	}
	c.reply(attributesReply(attrs))
	return nil
}

// A queueURLReply answers GetQueueUrl.
type queueURLReply string

func (q queueURLReply) appendJSON(dst []byte) []byte {
	resp, _ := json.Marshal(struct{ QueueUrl string }{string(q)})
	return append(dst, resp...)
}

func (q queueURLReply) appendXML(dst []byte) []byte {
	return appendXMLElement(dst, "QueueUrl", string(q))
}

// An attributesReply answers GetQueueAttributes: {} in JSON when it holds none.
type attributesReply map[string]string

func (a attributesReply) appendJSON(dst []byte) []byte {
	if len(a) == 0 {
		return append(dst, emptyObject...)
	}
	resp, _ := json.Marshal(struct{ Attributes map[string]string }{a})
	return append(dst, resp...)
}

func (a attributesReply) appendXML(dst []byte) []byte {
	for _, name := range slices.Sorted(maps.Keys(a)) {
		dst = append(dst, "<Attribute>"...)
		dst = appendXMLElement(dst, "Name", name)
		dst = appendXMLElement(dst, "Value", a[name])
		dst = append(dst, "</Attribute>"...)
	}
	return dst
}

// queueCounts sums the partitions' counts, in the order of queueAttributes: the records
// visible now (the backlog less what is leased, delayed, acked ahead of a gap or
// quarantined), those leased, and those a release's delay or a backoff holds back. A
// partition not loaded since the node started counts nothing yet: its state is on disk
// until a call loads it.
func queueCounts(status []router.PartitionStatus) [3]int64 {
	var c [3]int64
	for _, s := range status {
		c[0] += max(0, s.Backlog-int64(s.Leased+s.Delayed+s.AckedAhead+s.Quarantined))
		c[1] += int64(s.Leased)
		c[2] += int64(s.Delayed)
	}
	return c
}
