package sqsapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"narad.dev/consume/router"
)

// Message move tasks: StartMessageMoveTask, ListMessageMoveTasks and CancelMessageMoveTask.

// The states of a move task, as SQS names them.
const (
	moveRunning    = "RUNNING"
	moveCompleted  = "COMPLETED"
	moveCancelling = "CANCELLING"
	moveCancelled  = "CANCELLED"
	moveFailed     = "FAILED"
)

const (
	// maxMoveRate is the most MaxNumberOfMessagesPerSecond a task takes, as SQS has it.
	maxMoveRate = 500
	// keptMoveTasks is how many tasks of a source ListMessageMoveTasks can list.
	keptMoveTasks = 10
	// moveBatch is the most messages a task takes from its source at once, and
	// moveVisibility their lease while it moves them.
	moveBatch      = 10
	moveVisibility = 30 * time.Second
)

var codeResourceNotFound = &code{"ResourceNotFoundException", "ResourceNotFoundException", 400, true}

// moveTasks are a handler's move tasks: each runs in a goroutine of its own, which
// Handler.Close ends and waits for.
type moveTasks struct {
	mu       sync.Mutex
	byHandle map[string]*moveTask
	bySource map[string][]*moveTask // the latest first, at most keptMoveTasks
	ctx      context.Context        // ends with Close; nil until the first task
	cancel   context.CancelFunc
	closed   bool
	running  sync.WaitGroup
}

// A moveTask is one StartMessageMoveTask.
type moveTask struct {
	handle              string
	source, destination string // queue names; destination "" means each message's source
	sourceArn, destArn  string
	rate                int // messages a second; 0 means as fast as possible
	started             time.Time
	toMove              int64
	cancel              context.CancelFunc
	status, reason      string // under moveTasks.mu
	moved               int64  // under moveTasks.mu
	sourceTopic         string
}

// Close ends the handler's message move tasks and waits for them: each stops after the
// message it is moving (it is moved, or given back to its queue), and is CANCELLED. A
// StartMessageMoveTask after Close is ServiceUnavailable. The rest of the handler goes on
// serving.
func (h *Handler) Close() error {
	m := &h.moves
	m.mu.Lock()
	m.closed = true
	if m.cancel != nil {
		m.cancel()
	}
	m.mu.Unlock()
	m.running.Wait()
	return nil
}

// startMessageMoveTaskInput is StartMessageMoveTask's body.
type startMessageMoveTaskInput struct {
	SourceArn                    *string
	DestinationArn               *string
	MaxNumberOfMessagesPerSecond *int64
}

// taskHandleReply answers StartMessageMoveTask.
type taskHandleReply string

func (t taskHandleReply) appendJSON(dst []byte) []byte {
	resp, _ := json.Marshal(struct{ TaskHandle string }{string(t)})
	return append(dst, resp...)
}

func (t taskHandleReply) appendXML(dst []byte) []byte {
	return appendXMLElement(dst, "TaskHandle", string(t))
}

// isDeadLetterQueue reports whether some queue's RedrivePolicy names queue.
func (h *Handler) isDeadLetterQueue(queue string) bool {
	for _, name := range h.store.ListQueues("") {
		if rec, ok := h.store.Queue(name); ok {
			if p, ok := redrivePolicyOf(rec); ok {
				if dlq, ok := h.arnQueue(p.DeadLetterTargetArn); ok && dlq == queue {
					return true
				}
			}
		}
	}
	return false
}

// startMessageMoveTask serves StartMessageMoveTask: a task that moves the messages of
// SourceArn, a dead-letter queue, to DestinationArn, or each to the queue it came from.
func (h *Handler) startMessageMoveTask(c *call) error {
	var in startMessageMoveTaskInput
	if err := c.decode(&in); err != nil {
		return err
	}
	if err := h.needStore(c); err != nil {
		return err
	}
	if in.SourceArn == nil {
		return missing("SourceArn")
	}
	rate, err := integer("MaxNumberOfMessagesPerSecond", in.MaxNumberOfMessagesPerSecond, 1, maxMoveRate, 0)
	if err != nil {
		return err
	}
	source, ref, err := h.openSource(c, *in.SourceArn)
	if err != nil {
		return err
	}
	destination := ""
	if in.DestinationArn != nil {
		var ok bool
		if destination, ok = h.arnQueue(*in.DestinationArn); !ok {
			return resourceNotFound("DestinationArn")
		}
		if destination == source {
			return invalidValue("DestinationArn", strconv.Quote(truncate(*in.DestinationArn)), "The destination is the source.")
		}
	}
	if destination != "" {
		if _, ok := h.store.Queue(destination); !ok {
			return resourceNotFound("DestinationArn")
		}
	}
	if !h.isDeadLetterQueue(source) {
		return invalidValue("SourceArn", strconv.Quote(truncate(*in.SourceArn)), "Source queue must be configured as a Dead Letter Queue.")
	}
	status, err := h.queueStatus(c.r.Context(), ref.topic)
	if err != nil {
		return err
	}
	t := &moveTask{
		source: source, destination: destination, sourceArn: h.queueArn(source), rate: int(rate),
		started: h.now(), toMove: queueCounts(status)[0], status: moveRunning, sourceTopic: ref.topic,
	}
	if destination != "" {
		t.destArn = h.queueArn(destination)
	}
	var id [16]byte
	rand.Read(id[:])
	t.handle = hex.EncodeToString(id[:])

	m := &h.moves
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return fail(codeServiceUnavailable, "The endpoint is closing.")
	}
	for _, other := range m.bySource[source] {
		if other.status == moveRunning || other.status == moveCancelling {
			return invalidValue("SourceArn", strconv.Quote(truncate(*in.SourceArn)), "There is already a task running for this source.")
		}
	}
	if m.ctx == nil {
		m.ctx, m.cancel = context.WithCancel(context.Background())
		m.byHandle, m.bySource = map[string]*moveTask{}, map[string][]*moveTask{}
	}
	var ctx context.Context
	ctx, t.cancel = context.WithCancel(m.ctx)
	list := append([]*moveTask{t}, m.bySource[source]...)
	if len(list) > keptMoveTasks {
		for _, old := range list[keptMoveTasks:] {
			delete(m.byHandle, old.handle)
		}
		list = list[:keptMoveTasks]
	}
	m.bySource[source] = list
	m.byHandle[t.handle] = t
	m.running.Go(func() { h.runMoveTask(ctx, t) })
	c.reply(taskHandleReply(t.handle))
	return nil
}

// runMoveTask moves t's messages until its source has none visible, it is cancelled, or a
// message cannot be moved (FAILED, the message given back).
func (h *Handler) runMoveTask(ctx context.Context, t *moveTask) {
	defer t.cancel()
	end := func(status, reason string) {
		h.moves.mu.Lock()
		t.status, t.reason = status, reason
		h.moves.mu.Unlock()
	}
	var moved int64
	for {
		if ctx.Err() != nil {
			end(moveCancelled, "")
			return
		}
		msgs, err := h.node.Consume(ctx, t.sourceTopic, router.ConsumeOptions{Max: moveBatch, Visibility: moveVisibility})
		if ctx.Err() != nil {
			h.giveBack(t.sourceTopic, msgs)
			end(moveCancelled, "")
			return
		}
		if err != nil {
			end(moveFailed, "Reading the source queue: "+err.Error())
			return
		}
		if len(msgs) == 0 {
			end(moveCompleted, "")
			return
		}
		for i := range msgs {
			if err := h.pace(ctx, t, moved); err != nil {
				h.giveBack(t.sourceTopic, msgs[i:])
				end(moveCancelled, "")
				return
			}
			if err := h.moveOne(ctx, t, &msgs[i]); err != nil {
				h.giveBack(t.sourceTopic, msgs[i:])
				if ctx.Err() != nil {
					end(moveCancelled, "")
				} else {
					end(moveFailed, err.Error())
				}
				return
			}
			moved++
			h.moves.mu.Lock()
			t.moved = moved
			h.moves.mu.Unlock()
		}
	}
}

// pace waits until the task may move its next message, at its rate.
func (h *Handler) pace(ctx context.Context, t *moveTask, moved int64) error {
	if t.rate == 0 {
		return ctx.Err()
	}
	wait := time.Until(t.started.Add(time.Duration(moved) * time.Second / time.Duration(t.rate)))
	if wait <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// moveOne produces m into its destination and deletes it from the source.
func (h *Handler) moveOne(ctx context.Context, t *moveTask, m *router.Message) error {
	dest := t.destination
	if dest == "" {
		var ok bool
		if dest, ok = headerValue(m.Headers, deadLetterSourceHeader); !ok {
			return fmt.Errorf("Message %d:%d names no source queue to move it back to: give the task a DestinationArn.", m.Partition, m.Offset)
		}
	}
	rec, ok := h.store.Queue(dest)
	if !ok {
		return fmt.Errorf("The destination queue %s does not exist.", dest)
	}
	r := router.Record{Key: m.Key, Value: m.Value, Timestamp: m.Timestamp, Headers: withHeader(m.Headers, deadLetterSourceHeader, "")}
	if _, _, err := h.produce(ctx, rec.Topic, r); err != nil {
		return fmt.Errorf("Sending to %s: %v", dest, err)
	}
	if err := h.node.Ack(ctx, t.sourceTopic, m.Receipt); err != nil && !errors.Is(err, router.ErrGone) {
		// Moved, and still in the source: it may be moved again (at least once).
		return fmt.Errorf("Deleting message %d:%d from the source: %v", m.Partition, m.Offset, err)
	}
	return nil
}

// giveBack releases messages the task took and will not move.
func (h *Handler) giveBack(topic string, msgs []router.Message) {
	for i := range msgs {
		h.node.Release(context.Background(), topic, msgs[i].Receipt)
	}
}

// listMessageMoveTasksInput is ListMessageMoveTasks' body.
type listMessageMoveTasksInput struct {
	SourceArn  *string
	MaxResults *int64
}

// moveTaskEntry is one task in ListMessageMoveTasks' answer.
type moveTaskEntry struct {
	TaskHandle                        string `json:",omitempty"`
	Status                            string
	SourceArn                         string
	DestinationArn                    string `json:",omitempty"`
	MaxNumberOfMessagesPerSecond      int    `json:",omitempty"`
	ApproximateNumberOfMessagesMoved  int64
	ApproximateNumberOfMessagesToMove int64
	FailureReason                     string `json:",omitempty"`
	StartedTimestamp                  int64
}

type moveTasksReply []moveTaskEntry

func (r moveTasksReply) appendJSON(dst []byte) []byte {
	resp, _ := json.Marshal(struct{ Results []moveTaskEntry }{r})
	return append(dst, resp...)
}

func (r moveTasksReply) appendXML(dst []byte) []byte {
	for _, e := range r {
		dst = append(dst, "<ListMessageMoveTasksResultEntry>"...)
		if e.TaskHandle != "" {
			dst = appendXMLElement(dst, "TaskHandle", e.TaskHandle)
		}
		dst = appendXMLElement(dst, "Status", e.Status)
		dst = appendXMLElement(dst, "SourceArn", e.SourceArn)
		if e.DestinationArn != "" {
			dst = appendXMLElement(dst, "DestinationArn", e.DestinationArn)
		}
		if e.MaxNumberOfMessagesPerSecond != 0 {
			dst = appendXMLElement(dst, "MaxNumberOfMessagesPerSecond", strconv.Itoa(e.MaxNumberOfMessagesPerSecond))
		}
		dst = appendXMLElement(dst, "ApproximateNumberOfMessagesMoved", strconv.FormatInt(e.ApproximateNumberOfMessagesMoved, 10))
		dst = appendXMLElement(dst, "ApproximateNumberOfMessagesToMove", strconv.FormatInt(e.ApproximateNumberOfMessagesToMove, 10))
		if e.FailureReason != "" {
			dst = appendXMLElement(dst, "FailureReason", e.FailureReason)
		}
		dst = appendXMLElement(dst, "StartedTimestamp", strconv.FormatInt(e.StartedTimestamp, 10))
		dst = append(dst, "</ListMessageMoveTasksResultEntry>"...)
	}
	return dst
}

// listMessageMoveTasks serves ListMessageMoveTasks: the latest MaxResults (1 to 10,
// default 1) tasks of SourceArn, the latest first.
func (h *Handler) listMessageMoveTasks(c *call) error {
	var in listMessageMoveTasksInput
	if err := c.decode(&in); err != nil {
		return err
	}
	if err := h.needStore(c); err != nil {
		return err
	}
	if in.SourceArn == nil {
		return missing("SourceArn")
	}
	limit, err := integer("MaxResults", in.MaxResults, 1, keptMoveTasks, 1)
	if err != nil {
		return err
	}
	source, _, err := h.openSource(c, *in.SourceArn)
	if err != nil {
		return err
	}
	m := &h.moves
	m.mu.Lock()
	rep := moveTasksReply{}
	for _, t := range m.bySource[source] {
		if len(rep) == int(limit) {
			break
		}
		e := moveTaskEntry{
			Status: t.status, SourceArn: t.sourceArn, DestinationArn: t.destArn, MaxNumberOfMessagesPerSecond: t.rate,
			ApproximateNumberOfMessagesMoved: t.moved, ApproximateNumberOfMessagesToMove: t.toMove,
			FailureReason: t.reason, StartedTimestamp: t.started.UnixMilli(),
		}
		if t.status == moveRunning {
			e.TaskHandle = t.handle
		}
		rep = append(rep, e)
	}
	m.mu.Unlock()
	c.reply(rep)
	return nil
}

// cancelMessageMoveTaskInput is CancelMessageMoveTask's body.
type cancelMessageMoveTaskInput struct{ TaskHandle *string }

type movedReply int64

func (r movedReply) appendJSON(dst []byte) []byte {
	resp, _ := json.Marshal(struct{ ApproximateNumberOfMessagesMoved int64 }{int64(r)})
	return append(dst, resp...)
}

func (r movedReply) appendXML(dst []byte) []byte {
	return appendXMLElement(dst, "ApproximateNumberOfMessagesMoved", strconv.FormatInt(int64(r), 10))
}

// cancelMessageMoveTask serves CancelMessageMoveTask: a running task is CANCELLING until
// the message it is moving is moved (or given back), then CANCELLED.
func (h *Handler) cancelMessageMoveTask(c *call) error {
	var in cancelMessageMoveTaskInput
	if err := c.decode(&in); err != nil {
		return err
	}
	if err := h.needStore(c); err != nil {
		return err
	}
	if in.TaskHandle == nil {
		return missing("TaskHandle")
	}
	m := &h.moves
	m.mu.Lock()
	t := m.byHandle[*in.TaskHandle]
	m.mu.Unlock()
	if t == nil {
		return fail(codeResourceNotFound, "The resource that you specified for the TaskHandle parameter doesn't exist.")
	}
	if err := h.allow(c, t.source); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.status != moveRunning {
		return fail(codeResourceNotFound, "The task is not running: it is "+t.status+".")
	}
	t.status = moveCancelling
	t.cancel()
	c.reply(movedReply(t.moved))
	return nil
}

// resourceNotFound is SQS's answer to an ARN parameter naming no queue of the endpoint.
func resourceNotFound(param string) error {
	return fail(codeResourceNotFound, "The resource that you specified for the "+param+" parameter doesn't exist.")
}

// openSource opens the queue a move task's SourceArn names, as open does; an ARN of no
// queue of this endpoint, or of a queue that does not exist, is ResourceNotFoundException.
func (h *Handler) openSource(c *call, arn string) (string, queueRef, error) {
	source, ok := h.arnQueue(arn)
	if !ok {
		return "", queueRef{}, resourceNotFound("SourceArn")
	}
	ref, err := h.open(c, source)
	if errors.Is(err, codeQueueDoesNotExist) {
		err = resourceNotFound("SourceArn")
	}
	return source, ref, err
}
