package sqsapi

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"time"

	"narad.dev/consume/router"
)

// FIFO queues: a queue whose name ends in .fifo, its topic ordered by key
// (router.TopicConfig.Ordered), each message's MessageGroupId the record's key, and the
// sends deduplicated in the handler's memory over DeduplicationWindow, which a restarted
// handler rebuilds from the log (dedup_recovery.go).

// fifoSuffix ends the name of every FIFO queue, and of no other: SQS's rule, which tells a
// FIFO queue by its name alone.
const fifoSuffix = ".fifo"

// isFIFOName reports whether queue name is a FIFO queue's.
func isFIFOName(name string) bool { return strings.HasSuffix(name, fifoSuffix) }

// DeduplicationWindow is SQS's deduplication interval: a message sent to a FIFO queue with
// the MessageDeduplicationId of one sent within this long before is accepted and not sent
// again. On the handler's clock (Config.Now).
const DeduplicationWindow = 5 * time.Minute

// MaxDeduplicationIDs bounds the deduplication ids one FIFO queue's window remembers (a few
// hundred bytes each): past it, the oldest is forgotten before its DeduplicationWindow ends,
// and a send of it again is sent again. A queue sent over 436 messages a second on average
// has its window cut short so.
const MaxDeduplicationIDs = 1 << 17

// maxFIFOID is the bound of a MessageGroupId, a MessageDeduplicationId and a
// ReceiveRequestAttemptId: 128 characters.
const maxFIFOID = 128

// The FIFO queue attributes, their values, and a new FIFO queue's.
const (
	attrFifoQueue                 = "FifoQueue"
	attrContentBasedDeduplication = "ContentBasedDeduplication"
	attrDeduplicationScope        = "DeduplicationScope"
	attrFifoThroughputLimit       = "FifoThroughputLimit"
)

var fifoAttributeValues = map[string][]string{
	attrFifoQueue:                 {"true"},
	attrContentBasedDeduplication: {"false", "true"},
	attrDeduplicationScope:        {"queue", "messageGroup"},
	attrFifoThroughputLimit:       {"perQueue", "perMessageGroupId"},
}

// fifoDefaults are a new FIFO queue's FIFO attributes, as SQS answers them.
func fifoDefaults() map[string]string {
	return map[string]string{
		attrFifoQueue: "true", attrContentBasedDeduplication: "false",
		attrDeduplicationScope: "queue", attrFifoThroughputLimit: "perQueue",
	}
}

// checkFIFOAttribute checks a FIFO attribute set on a queue (fifo: a FIFO queue's; create:
// by CreateQueue) and returns its value written out. On a standard queue each is an
// attribute SQS does not know (InvalidAttributeName, as SQS answers even FifoQueue=false);
// FifoQueue is set only as the queue is created.
func checkFIFOAttribute(name, v string, fifo, create bool) (string, error) {
	switch {
	case !fifo:
		return "", fail(codeInvalidAttributeName, "Unknown Attribute "+name+".")
	case name == attrFifoQueue && !create:
		return "", fail(codeInvalidAttributeName, "Attribute FifoQueue is set only when the queue is created.")
	}
	for _, ok := range fifoAttributeValues[name] {
		if strings.EqualFold(v, ok) {
			return ok, nil
		}
	}
	return "", fail(codeInvalidAttributeValue, "Invalid value for the parameter "+name+": "+strconv.Quote(truncate(v))+" is not one of "+strings.Join(fifoAttributeValues[name], ", ")+".")
}

// checkThroughput refuses what SQS refuses of a FIFO queue's attributes together: a
// FifoThroughputLimit of perMessageGroupId is for a DeduplicationScope of messageGroup only.
func checkThroughput(attrs map[string]string) error {
	if attrs[attrFifoThroughputLimit] == "perMessageGroupId" && attrs[attrDeduplicationScope] != "messageGroup" {
		return fail(codeInvalidAttributeValue, "Invalid value for the parameter FifoThroughputLimit: perMessageGroupId is allowed only when DeduplicationScope is messageGroup.")
	}
	return nil
}

// checkQueueType checks SQS's rule of CreateQueue: a name ends in .fifo if and only if the
// attributes set FifoQueue to true.
func checkQueueType(name string, attrs map[string]string) error {
	v, set := attrs[attrFifoQueue]
	fifo := set && strings.EqualFold(v, "true")
	switch {
	case isFIFOName(name) && !fifo:
		return invalidValue("QueueName", strconv.Quote(name), "A queue whose name ends in .fifo is a FIFO queue: its attributes must set FifoQueue to true.")
	case !isFIFOName(name) && fifo:
		return invalidValue("QueueName", strconv.Quote(name), "The name of a FIFO queue must end with the .fifo suffix.")
	}
	return nil
}

// IsFIFO reports whether rec is a FIFO queue's record (its FifoQueue attribute is true).
func IsFIFO(rec QueueRecord) bool { return rec.Attributes[attrFifoQueue] == "true" }

// TopicConfig is the router.TopicConfig of a queue's topic, as a host's router.Config.Topic
// answers it: MaxDeliveries from its RedrivePolicy (see MaxDeliveries), Ordered for a FIFO
// queue, whose records are ordered by key (a message's MessageGroupId), and the queue's
// VisibilityTimeout. A receive that names no visibility timeout of its own leases for the
// queue's, and a node reading ahead for its receives (a node of a cluster that does not own
// the queue's partitions) serves those from the records it holds, which it reserved with the
// topic's. A FIFO queue does not read ahead (router.ReadAheadOff): a receive takes a
// group's run of messages together from its owner, where a node reading ahead holds one
// message of a group at a time. A host that sets other fields of the topic's configuration
// starts from this one.
func TopicConfig(rec QueueRecord) router.TopicConfig {
	cfg := router.TopicConfig{MaxDeliveries: MaxDeliveries(rec), Ordered: IsFIFO(rec)}
	if s, err := strconv.ParseInt(rec.Attributes["VisibilityTimeout"], 10, 64); err == nil && s > 0 {
		cfg.VisibilityTimeout = time.Duration(min(s, MaxVisibilitySeconds)) * time.Second
	}
	if cfg.Ordered {
		cfg.ReadAhead = router.ReadAheadOff
	}
	return cfg
}

// checkFIFOID checks a MessageGroupId, MessageDeduplicationId or ReceiveRequestAttemptId as
// SQS takes them: 1 to 128 of the ASCII letters, digits and punctuation.
func checkFIFOID(param, v string) error {
	if v == "" || len(v) > maxFIFOID {
		return invalidValue(param, strconv.Quote(truncate(v)), fmt.Sprintf("%s must be 1 to %d characters long.", param, maxFIFOID))
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < '!' || c > '~' {
			return invalidValue(param, strconv.Quote(truncate(v)), param+" can only include alphanumeric and punctuation characters.")
		}
	}
	return nil
}

// deduplicationHeader is the key of the header of a FIFO queue's record that holds its
// MessageDeduplicationId (the one sent, or the body's SHA-256 in hex): answered by a
// receive, never as a message attribute (internalPrefix).
const deduplicationHeader = internalPrefix + "MessageDeduplicationId"

// contentDeduplicationID is the MessageDeduplicationId of content-based deduplication: the
// SHA-256 of the body, in hex.
func contentDeduplicationID(body []byte) string {
	sum := sha256.Sum256(body)
	return hex.EncodeToString(sum[:])
}

// appendSequenceNumber appends the SequenceNumber of a FIFO queue's record: its partition
// times 2^64 plus its offset, in decimal. A group's records are in one partition (the record's
// key is the group), so a group's numbers grow as SQS's do; they fit in SQS's 128 bits.
func appendSequenceNumber(dst []byte, partition int32, offset int64) []byte {
	hi, lo := uint64(uint32(partition)), uint64(offset)
	if hi == 0 {
		return strconv.AppendUint(dst, lo, 10)
	}
	const tenE19 = 10_000_000_000_000_000_000
	q, r := bits.Div64(hi, lo, tenE19) // hi < 2^32 < 10^19: no overflow
	dst = strconv.AppendUint(dst, q, 10)
	var digits [19]byte
	for i := len(digits) - 1; i >= 0; i-- {
		digits[i] = byte('0' + r%10)
		r /= 10
	}
	return append(dst, digits[:]...)
}

// dedupWindows are the FIFO queues' deduplication windows, by queue name: each the ids sent
// in the last DeduplicationWindow (at most MaxDeduplicationIDs), in the handler's memory.
type dedupWindows struct {
	mu     sync.Mutex
	queues map[string]*dedupWindow
	swept  int // len(queues) after the last sweep: the next comes once it has doubled
	// recovered holds a queue whose window was rebuilt from the log (nil), or is being
	// (closed once done): see recoverWindow. A queue the handler never sent to is absent.
	recovered map[string]chan struct{}
}

// A dedupWindow is one queue's: its ids by key (the id, or group and id with a
// DeduplicationScope of messageGroup), and the same entries in the order they were sent, to
// forget the oldest first.
type dedupWindow struct {
	ids   map[string]*dedupEntry
	order []*dedupEntry
	head  int // order[head:] are live or stale entries; order[:head] forgotten
}

// A dedupEntry is a send of one deduplication id: pending until done is closed, then sent
// (messageID set) or failed (out of the window's map).
type dedupEntry struct {
	key       string
	at        time.Time
	done      chan struct{}
	messageID string // partition:offset, set once sent
	partition int32
	offset    int64
}

// claim returns the entry of key in queue's window: a sent or pending send of it within the
// window (dup true), or a new pending one the caller sends and then ends with finish.
func (d *dedupWindows) claim(queue, key string, now time.Time) (e *dedupEntry, dup bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	w := d.window(queue, now)
	w.expire(now)
	if e, ok := w.ids[key]; ok {
		return e, true
	}
	for len(w.ids) >= MaxDeduplicationIDs {
		w.forgetOldest()
	}
	e = &dedupEntry{key: key, at: now, done: make(chan struct{})}
	w.ids[key] = e
	w.order = append(w.order, e)
	return e, false
}

// window returns queue's window, made if need be. The caller holds d.mu.
func (d *dedupWindows) window(queue string, now time.Time) *dedupWindow {
	if d.queues == nil {
		d.queues = map[string]*dedupWindow{}
	}
	w := d.queues[queue]
	if w == nil {
		w = &dedupWindow{ids: map[string]*dedupEntry{}}
		d.queues[queue] = w
		if len(d.queues) >= 2*d.swept+16 { // amortized: the map holds the queues sent to lately
			for name, other := range d.queues {
				if other.expire(now); len(other.ids) == 0 && other != w {
					delete(d.queues, name)
				}
			}
			d.swept = len(d.queues)
		}
	}
	return w
}

// finish ends a pending send: sent, it stays for the window; failed, it is forgotten, so that
// a retry sends.
func (d *dedupWindows) finish(queue string, e *dedupEntry, partition int32, offset int64, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err == nil {
		e.partition, e.offset = partition, offset
		e.messageID = string(appendMessageID(nil, partition, offset))
	} else if w := d.queues[queue]; w != nil && w.ids[e.key] == e {
		delete(w.ids, e.key)
	}
	close(e.done)
}

// forget drops queue's window: a queue deleted, whose name a new queue may take.
func (d *dedupWindows) forget(queue string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.queues, queue)
	delete(d.recovered, queue)
}

// expire forgets the entries sent DeduplicationWindow or longer before now.
func (w *dedupWindow) expire(now time.Time) {
	for w.head < len(w.order) && !now.Before(w.order[w.head].at.Add(DeduplicationWindow)) {
		w.forgetOldest()
	}
}

// forgetOldest forgets the oldest entry; the order's slice is compacted once half of it is
// forgotten.
func (w *dedupWindow) forgetOldest() {
	e := w.order[w.head]
	w.order[w.head] = nil
	w.head++
	if w.ids[e.key] == e {
		delete(w.ids, e.key)
	}
	if w.head > len(w.order)/2 && w.head >= 64 || w.head == len(w.order) {
		w.order = append(w.order[:0], w.order[w.head:]...)
		w.head = 0
	}
}

// sendFIFO sends a message to a FIFO queue unless its deduplication key was sent within
// DeduplicationWindow: then the original's MessageId and SequenceNumber are answered and
// nothing is sent. A send of the key in progress is waited for; one that failed is tried again
// here.
func (h *Handler) sendFIFO(ctx context.Context, queue string, ref *queueRef, m *sentMessage) (id string, seq string, err error) {
	key := m.dedupID
	if ref.rec.Attributes[attrDeduplicationScope] == "messageGroup" {
		key = string(m.group) + "\x00" + key // no id holds a zero byte
	}
	if err := h.recoverWindow(ctx, queue, ref); err != nil {
		return "", "", err
	}
	for {
		now := h.now()
		e, dup := h.dedup.claim(queue, key, now)
		if !dup {
			rec := m.record()
			rec.Timestamp = now // what a restarted handler's window is rebuilt from
			p, off, err := h.produce(ctx, ref.topic, rec)
			h.dedup.finish(queue, e, p, off, err)
			if err != nil {
				return "", "", err
			}
			return e.messageID, string(appendSequenceNumber(nil, p, off)), nil
		}
		select {
		case <-e.done:
		case <-ctx.Done():
			return "", "", ctx.Err()
		}
		if e.messageID != "" {
			return e.messageID, string(appendSequenceNumber(nil, e.partition, e.offset)), nil
		}
		// The first send failed and was forgotten: this one claims the key afresh.
	}
}
