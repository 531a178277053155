package sqsapi

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"time"

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
	name, err := queueNameParam(in.QueueName)
	if err != nil {
		return err
	}
	if _, err := h.open(c, name); err != nil {
		return err
	}
	c.reply(queueURLReply(h.queueURL(name)))
	return nil
}

// getQueueAttributesInput is GetQueueAttributes' body.
type getQueueAttributesInput struct {
	QueueUrl       *string
	AttributeNames []string
}

// The queue attributes the handler serves, by bit (queueAttributes[i] is bit i): the counts,
// and with Config.Store the attributes the queue keeps, its ARN and timestamps.
const (
	attrMessages = 1 << iota
	attrNotVisible
	attrDelayed
	attrVisibilityTimeout
	attrDelaySeconds
	attrMaximumMessageSize
	attrMessageRetentionPeriod
	attrReceiveMessageWaitTimeSeconds
	attrRedrivePolicy
	attrQueueArn
	attrCreatedTimestamp
	attrLastModifiedTimestamp
	attrAgeOfOldest // by name only: not one of SQS's attributes, so not in All
	// A FIFO queue's.
	attrFifoQueueBit
	attrContentBasedDeduplicationBit
	attrDeduplicationScopeBit
	attrFifoThroughputLimitBit
)

var queueAttributes = []string{
	"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesDelayed",
	"VisibilityTimeout", "DelaySeconds", "MaximumMessageSize", "MessageRetentionPeriod", "ReceiveMessageWaitTimeSeconds",
	"RedrivePolicy", "QueueArn", "CreatedTimestamp", "LastModifiedTimestamp", "ApproximateAgeOfOldestMessage",
	attrFifoQueue, attrContentBasedDeduplication, attrDeduplicationScope, attrFifoThroughputLimit,
}

// knownQueueAttributeNames are the queue attributes SQS knows, and
// ApproximateAgeOfOldestMessage: any other is InvalidAttributeName. Those not in
// queueAttributes are accepted and not returned.
var knownQueueAttributeNames = setOf(
	"Policy", "VisibilityTimeout", "MaximumMessageSize", "MessageRetentionPeriod",
	"ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible", "CreatedTimestamp",
	"LastModifiedTimestamp", "QueueArn", "ApproximateNumberOfMessagesDelayed", "DelaySeconds",
	"ReceiveMessageWaitTimeSeconds", "RedrivePolicy", "FifoQueue", "ContentBasedDeduplication",
	"KmsMasterKeyId", "KmsDataKeyReusePeriodSeconds", "DeduplicationScope", "FifoThroughputLimit",
	"RedriveAllowPolicy", "SqsManagedSseEnabled", "ApproximateAgeOfOldestMessage",
)

// getQueueAttributes serves GetQueueAttributes: the counts of every partition of the topic
// (queueStatus: wherever it is owned, with a QueueCounter), summed, and with Config.Store the queue's attributes,
// ARN and timestamps; ApproximateAgeOfOldestMessage, asked by name, is the oldest
// PartitionStatus.OldestUnsettledAge known, in seconds.
func (h *Handler) getQueueAttributes(c *call) error {
	var in getQueueAttributesInput
	if err := c.decode(&in); err != nil {
		return err
	}
	want, err := attributeNames("AttributeNames", in.AttributeNames, knownQueueAttributeNames, queueAttributes)
	if err != nil {
		return err
	}
	if slices.Contains(in.AttributeNames, "All") && !slices.Contains(in.AttributeNames, "ApproximateAgeOfOldestMessage") {
		want &^= attrAgeOfOldest
	}
	queue, ref, err := h.openRef(c, in.QueueUrl)
	if err != nil {
		return err
	}
	attrs := map[string]string{}
	if want&(attrMessages|attrNotVisible|attrDelayed|attrAgeOfOldest) != 0 {
		status, err := h.queueStatus(c.r.Context(), ref.topic)
		if err != nil {
			return err
		}
		counts := queueCounts(status)
		for i := range 3 {
			if want&(1<<i) != 0 {
				attrs[queueAttributes[i]] = strconv.FormatInt(counts[i], 10)
			}
		}
		if want&attrAgeOfOldest != 0 {
			var oldest time.Duration
			for _, s := range status {
				oldest = max(oldest, s.OldestUnsettledAge)
			}
			attrs["ApproximateAgeOfOldestMessage"] = strconv.FormatInt(int64(oldest/time.Second), 10)
		}
	}
	if ref.managed {
		for i := 3; i < len(queueAttributes); i++ {
			name := queueAttributes[i]
			if want&(1<<i) == 0 {
				continue
			}
			switch name {
			case "QueueArn":
				attrs[name] = h.queueArn(queue)
			case "CreatedTimestamp":
				attrs[name] = unixSeconds(ref.rec.Created)
			case "LastModifiedTimestamp":
				attrs[name] = unixSeconds(ref.rec.Modified)
			default:
				if v, ok := ref.rec.Attributes[name]; ok {
					attrs[name] = v
				}
			}
		}
	}
	if !ref.managed && ref.fifo { // a FIFO queue of Config.Queues: SQS's defaults, which act
		for name, v := range fifoDefaults() {
			if i := slices.Index(queueAttributes, name); want&(1<<i) != 0 {
				attrs[name] = v
			}
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

// A pairsReply answers with a map of names to values: GetQueueAttributes' Attributes,
// ListQueueTags' Tags. In JSON it is {} when the map is empty; in XML each pair is an element
// (element) holding the name (nameTag) and the value, sorted by name.
type pairsReply struct {
	field, element, nameTag string
	pairs                   map[string]string
}

// attributesReply answers GetQueueAttributes.
func attributesReply(attrs map[string]string) pairsReply {
	return pairsReply{field: "Attributes", element: "Attribute", nameTag: "Name", pairs: attrs}
}

// tagsReply answers ListQueueTags.
func tagsReply(tags map[string]string) pairsReply {
	return pairsReply{field: "Tags", element: "Tag", nameTag: "Key", pairs: tags}
}

func (r pairsReply) appendJSON(dst []byte) []byte {
	if len(r.pairs) == 0 {
		return append(dst, emptyObject...)
	}
	resp, _ := json.Marshal(map[string]map[string]string{r.field: r.pairs})
	return append(dst, resp...)
}

func (r pairsReply) appendXML(dst []byte) []byte {
	for _, name := range slices.Sorted(maps.Keys(r.pairs)) {
		dst = append(append(append(dst, '<'), r.element...), '>')
		dst = appendXMLElement(dst, r.nameTag, name)
		dst = appendXMLElement(dst, "Value", r.pairs[name])
		dst = append(append(append(dst, "</"...), r.element...), '>')
	}
	return dst
}

// queueCounts sums the partitions' counts, in the order of queueAttributes: the records
// visible now (the backlog less what is leased, delayed, acked ahead of a gap or
// quarantined), those leased, and those a release's delay or a backoff holds back. A
// partition not loaded since its owner started counts what its persisted state says
// (router.PartitionStatus): nothing of it is in flight there. A partition its owner did not
// count (router.Node.QueueStatus: an owner down, silent or on an older release) counts
// nothing: its backlog is zero.
func queueCounts(status []router.PartitionStatus) [3]int64 {
	var c [3]int64
	for _, s := range status {
		c[0] += max(0, s.Backlog-int64(s.Leased+s.Delayed+s.AckedAhead+s.Quarantined))
		c[1] += int64(s.Leased)
		c[2] += int64(s.Delayed)
	}
	return c
}
