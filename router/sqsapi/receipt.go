package sqsapi

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"strconv"
	"strings"
	"sync"

	"narad.dev/consume/router"
)

// A receipt handle is the node's handle text and a tag that binds it to its queue:
//
//	<partition>:<offset>:<nonce>:<tag>
//
// where tag is the first 8 bytes, in lowercase hex, of HMAC-SHA256(Config.ReceiptKey, the
// queue's name, a zero byte, the node's handle text). A handle sent with another queue's URL,
// or one whose partition, offset or nonce was changed, fails the tag and is
// ReceiptHandleIsInvalid, and reaches no node. The nonce is the node's, unguessable as ever:
// the tag adds to it, and takes nothing from it.
const tagLen = 16

// receiptTagger computes receipt tags with one key; its hashes are pooled.
type receiptTagger struct{ pool sync.Pool }

// A tagHash is a pooled HMAC and the buffers it works in.
type tagHash struct {
	mac hash.Hash
	in  []byte
	sum []byte
}

func newReceiptTagger(key []byte) *receiptTagger {
	k := append([]byte(nil), key...)
	t := &receiptTagger{}
	t.pool.New = func() any { return &tagHash{mac: hmac.New(sha256.New, k), sum: make([]byte, 0, sha256.Size)} }
	return t
}

// appendTag appends the tag of the node's handle text for queue.
func appendTag[S ~string | ~[]byte](t *receiptTagger, dst []byte, queue string, handle S) []byte {
	h := t.pool.Get().(*tagHash)
	h.in = append(append(append(h.in[:0], queue...), 0), handle...)
	h.mac.Reset()
	h.mac.Write(h.in)
	h.sum = h.mac.Sum(h.sum[:0])
	dst = hex.AppendEncode(dst, h.sum[:tagLen/2])
	t.pool.Put(h)
	return dst
}

// appendReceipt appends the receipt handle of handle, a delivery of queue.
func (t *receiptTagger) appendReceipt(dst []byte, queue string, handle router.Handle) []byte {
	start := len(dst)
	dst = handle.AppendText(dst)
	text := dst[start:]
	dst = append(dst, ':')
	return appendTag(t, dst, queue, text)
}

// A receipt is a receipt handle whose form has been checked: the node's handle and the tag
// it came with, not yet checked against the queue.
type receipt struct {
	handle router.Handle
	text   string // the node's handle text
	tag    string
}

// parseReceipt reads a required receipt handle's form: the node's handle text, which must
// parse, a colon and a tag of tagLen lowercase hex digits.
func parseReceipt(text *string) (receipt, error) {
	if text == nil {
		return receipt{}, missing("ReceiptHandle")
	}
	invalid := func() error {
		return fail(codeReceiptHandleIsInvalid, "The receipt handle "+strconv.Quote(truncate(*text))+" is not valid.")
	}
	node, tag, ok := cutLast(*text, ':')
	if !ok || len(tag) != tagLen || strings.Trim(tag, "0123456789abcdef") != "" {
		return receipt{}, invalid()
	}
	h, err := router.ParseHandle(node)
	if err != nil {
		return receipt{}, invalid()
	}
	return receipt{handle: h, text: node, tag: tag}, nil
}

// check answers whether rc was issued for queue: ReceiptHandleIsInvalid if not.
func (t *receiptTagger) check(rc receipt, queue string) (router.Handle, error) {
	var buf [tagLen]byte
	if !hmac.Equal(appendTag(t, buf[:0], queue, rc.text), []byte(rc.tag)) {
		return router.Handle{}, fail(codeReceiptHandleIsInvalid, "The receipt handle "+strconv.Quote(truncate(rc.text+":"+rc.tag))+
			" is not valid for this queue.")
	}
	return rc.handle, nil
}

// cutLast slices s around the last sep.
func cutLast(s string, sep byte) (before, after string, found bool) {
	i := strings.LastIndexByte(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}

// firstReceives remembers when the handler first delivered a record, so that a redelivery
// answers ApproximateFirstReceiveTimestamp too: the node keeps a record's attempts, not the
// time of its first delivery. Bounded: at most maxFirstReceives records, an arbitrary one
// forgotten to make room; a record is forgotten when DeleteMessage acks it.
type firstReceives struct {
	mu sync.Mutex
	at map[recordKey]int64 // ms since the epoch
}

type recordKey struct {
	topic     string
	partition int32
	offset    int64
}

// maxFirstReceives bounds what firstReceives remembers: about 100 bytes a record.
const maxFirstReceives = 1 << 16

// stamp answers the first receive time of each of msgs delivered at now (ms), into at:
// now for a first delivery, which is remembered, and what was remembered for a redelivery
// (now when nothing was: the record was first delivered before this handler started,
// through another node's, or was forgotten).
func (f *firstReceives) stamp(topic string, msgs []router.Message, now int64, at []int64) []int64 {
	at = at[:0]
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.at == nil {
		f.at = make(map[recordKey]int64)
	}
	for i := range msgs {
		m := &msgs[i]
		k := recordKey{topic, m.Partition, m.Offset}
		t, ok := f.at[k]
		if m.Attempt <= 1 || !ok {
			t = now
			if !ok && len(f.at) >= maxFirstReceives {
				for old := range f.at {
					delete(f.at, old)
					break
				}
			}
			f.at[k] = t
		}
		at = append(at, t)
	}
	return at
}

// forget drops what is remembered of the records handles name, of topic.
func (f *firstReceives) forget(topic string, handles ...router.Handle) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range handles {
		delete(f.at, recordKey{topic, h.Partition, h.Offset})
	}
}
