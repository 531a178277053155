package sqsapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
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
	// moveSaveEvery is how often a running task's progress is saved to Config.MoveTasks, at
	// most: a resumed task's ApproximateNumberOfMessagesMoved lags by what it moved since.
	moveSaveEvery = time.Second
)

// MoveTask is a message move task as a MoveTaskStore keeps it.
type MoveTask struct {
	// Handle is the task's TaskHandle.
	Handle string
	// Source is the name of the queue it moves from, Destination of the queue it moves to
	// ("": each message back to the queue it came from).
	Source, Destination string
	// Rate is its MaxNumberOfMessagesPerSecond; 0 means as fast as it can.
	Rate int
	// Started is when it started, on the handler's clock (Config.Now).
	Started time.Time
	// ToMove and Moved are its ApproximateNumberOfMessagesToMove and ...Moved.
	ToMove, Moved int64
	// Status is RUNNING, COMPLETED, CANCELLED or FAILED; FailureReason says why a FAILED
	// task failed.
	Status, FailureReason string
}

// A MoveTaskStore keeps the handler's message move tasks across restarts (Config.MoveTasks),
// so that ListMessageMoveTasks lists them after a restart and a task that was RUNNING when
// the handler stopped resumes. The handler calls one method at a time.
type MoveTaskStore interface {
	// SaveMoveTasks replaces the tasks kept with tasks, durably, before it returns: at a
	// task's start (an error then refuses the task, InternalFailure), every second or so of
	// its progress, at its end, and when Close stops it (saved RUNNING). A crash during a
	// save must leave the tasks of one save or of the other, whole.
	SaveMoveTasks(tasks []MoveTask) error
	// MoveTasks returns the tasks last saved, none before the first save; New asks it once.
	MoveTasks() ([]MoveTask, error)
}

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
	store    MoveTaskStore // Config.MoveTasks; nil: the tasks live in memory
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
	// The rate counts from paceFrom, when the task started or resumed, with paceBase
	// messages moved then.
	paceFrom time.Time
	paceBase int64
	// stopped: Close ended it while it ran, and it is saved RUNNING, to resume. savedAt is
	// when its progress was last saved. Both under moveTasks.mu.
	stopped bool
	savedAt time.Time
}

// Close ends the handler's message move tasks and waits for them: each stops after the
// message it is moving (it is moved, or given back to its queue), and is CANCELLED, or, with
// Config.MoveTasks, saved RUNNING with its progress, to resume when a handler is next made
// over the store. A StartMessageMoveTask after Close is ServiceUnavailable. The rest of the
// handler goes on serving.
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
	var id [16]byte
	rand.Read(id[:])
	t := h.newMoveTask(MoveTask{
		Handle: hex.EncodeToString(id[:]), Source: source, Destination: destination, Rate: int(rate),
		Started: h.now(), ToMove: queueCounts(status)[0], Status: moveRunning,
	}, ref.topic)

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
	m.init()
	before := m.bySource[source]
	m.keepLocked(t)
	if err := h.saveMovesLocked(); err != nil {
		// Not durable, so not started: as if it never was.
		delete(m.byHandle, t.handle)
		m.bySource[source] = before
		for _, old := range before {
			m.byHandle[old.handle] = old
		}
		return fmt.Errorf("saving the message move task: %w", err)
	}
	m.runLocked(h, t)
	c.reply(taskHandleReply(t.handle))
	return nil
}

// newMoveTask is the task s describes, of source topic topic.
func (h *Handler) newMoveTask(s MoveTask, topic string) *moveTask {
	t := &moveTask{
		handle: s.Handle, source: s.Source, destination: s.Destination, sourceArn: h.queueArn(s.Source),
		rate: s.Rate, started: s.Started, toMove: s.ToMove, moved: s.Moved, status: s.Status, reason: s.FailureReason,
		sourceTopic: topic, paceFrom: h.now(), paceBase: s.Moved,
	}
	if s.Destination != "" {
		t.destArn = h.queueArn(s.Destination)
	}
	return t
}

// init makes the maps and the context of the tasks, at the first task. Called with m.mu
// held.
func (m *moveTasks) init() {
	if m.ctx == nil {
		m.ctx, m.cancel = context.WithCancel(context.Background())
		m.byHandle, m.bySource = map[string]*moveTask{}, map[string][]*moveTask{}
	}
}

// keepLocked lists t as its source's latest task, forgetting the source's oldest past
// keptMoveTasks.
func (m *moveTasks) keepLocked(t *moveTask) {
	list := append([]*moveTask{t}, m.bySource[t.source]...)
	if len(list) > keptMoveTasks {
		for _, old := range list[keptMoveTasks:] {
			delete(m.byHandle, old.handle)
		}
		list = list[:keptMoveTasks]
	}
	m.bySource[t.source] = list
	m.byHandle[t.handle] = t
}

// runLocked runs t in a goroutine of its own, which Close ends.
func (m *moveTasks) runLocked(h *Handler, t *moveTask) {
	var ctx context.Context
	ctx, t.cancel = context.WithCancel(m.ctx)
	m.running.Go(func() { h.runMoveTask(ctx, t) })
}

// saveMovesLocked saves every task listed to Config.MoveTasks, the sources in order of name
// and each source's latest first; a task Close stopped is saved RUNNING. Called with
// h.moves.mu held, so that the saves follow one another in the order of the changes.
func (h *Handler) saveMovesLocked() error {
	m := &h.moves
	if m.store == nil {
		return nil
	}
	var tasks []MoveTask
	for _, source := range slices.Sorted(maps.Keys(m.bySource)) {
		for _, t := range m.bySource[source] {
			s := MoveTask{
				Handle: t.handle, Source: t.source, Destination: t.destination, Rate: t.rate, Started: t.started,
				ToMove: t.toMove, Moved: t.moved, Status: t.status, FailureReason: t.reason,
			}
			if t.stopped {
				s.Status = moveRunning
			}
			tasks = append(tasks, s)
		}
	}
	return m.store.SaveMoveTasks(tasks)
}

// saveMovesOrLog saves the tasks as saveMovesLocked does and logs a failure: a task's
// progress or end not saved is one a restart resumes from an older save (it moves what its
// source still holds). Called with h.moves.mu held.
func (h *Handler) saveMovesOrLog(t *moveTask) {
	if err := h.saveMovesLocked(); err != nil {
		h.log.Error("sqsapi: saving the message move tasks", "task", t.handle, "source", t.source, "err", err)
	}
}

// resumeMoveTasks lists the tasks Config.MoveTasks kept and runs again those that were
// RUNNING, each from the messages its source still holds; one whose source queue is gone
// FAILED, and one that was being cancelled CANCELLED.
func (h *Handler) resumeMoveTasks(saved []MoveTask) error {
	m := &h.moves
	m.mu.Lock()
	defer m.mu.Unlock()
	m.init()
	var resume []*moveTask
	for i := len(saved) - 1; i >= 0; i-- { // each source's oldest first: keepLocked puts the latest first
		s := saved[i]
		if s.Handle == "" || s.Source == "" || m.byHandle[s.Handle] != nil {
			return fmt.Errorf("sqsapi: Config.MoveTasks has a task of no handle, no source, or a handle twice: %+v", s)
		}
		rec, ok := h.store.Queue(s.Source)
		t := h.newMoveTask(s, rec.Topic)
		switch {
		case t.status == moveCancelling:
			t.status = moveCancelled
		case t.status == moveRunning && !ok:
			t.status, t.reason = moveFailed, "The source queue "+s.Source+" no longer exists."
		case t.status == moveRunning:
			resume = append(resume, t)
		}
		m.keepLocked(t)
	}
	for _, t := range resume {
		m.runLocked(h, t)
	}
	return nil
}

// runMoveTask moves t's messages until its source has none visible, it is cancelled, or a
// message cannot be moved (FAILED, the message given back). Its progress and its end are
// saved (Config.MoveTasks).
func (h *Handler) runMoveTask(ctx context.Context, t *moveTask) {
	defer t.cancel()
	m := &h.moves
	end := func(status, reason string) {
		m.mu.Lock()
		defer m.mu.Unlock()
		t.stopped = status == moveCancelled && t.status == moveRunning && m.closed // not a CancelMessageMoveTask
		t.status, t.reason = status, reason
		h.saveMovesOrLog(t)
	}
	m.mu.Lock()
	moved := t.moved
	t.savedAt = h.now()
	m.mu.Unlock()
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
			m.mu.Lock()
			t.moved = moved
			if now := h.now(); now.Sub(t.savedAt) >= moveSaveEvery {
				t.savedAt = now
				h.saveMovesOrLog(t)
			}
			m.mu.Unlock()
		}
	}
}

// pace waits until the task may move its next message, at its rate.
func (h *Handler) pace(ctx context.Context, t *moveTask, moved int64) error {
	if t.rate == 0 {
		return ctx.Err()
	}
	wait := t.paceFrom.Add(time.Duration(moved-t.paceBase) * time.Second / time.Duration(t.rate)).Sub(h.now())
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
	h.saveMovesOrLog(t) // a restart before it ends does not resume it
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
