package offsets

import (
	"sync"
	"time"
)

// Log messages. The first three are fixed, word for word, so that operators can search for
// them.
const (
	msgStranded = "consumer offsets: partition directory removed or replaced under its persisted state; " +
		"its acks are not persisted until the partition is dropped"
	msgOverrun = "consumer offset commits cannot keep to their interval: " +
		"persisted offsets lag acks by about the flush time"
	msgLate = "consumer offsets wait longer than their durability interval for a device flush: " +
		"a power loss would redeliver more acks than it promises"
	msgDropped = "consumer offsets: acked-ahead set too large for a consumer.ahead slot; " +
		"its highest offsets are not persisted and are delivered again after a restart"
	msgDroppedRequeued = "consumer offsets: requeued offsets too many for a consumer.ahead slot; " +
		"the highest are not persisted and a restart does not deliver them again"
	msgDroppedSets = "consumer offsets: quarantine or delivery attempts too large for a consumer.ahead slot; " +
		"the highest quarantined offsets are not persisted (a restart leaves them settled, not requeueable) " +
		"and the highest attempts are counted afresh"
	msgClamped = "consumer offsets: persisted frontier at or above the log's high watermark " +
		"(the log lost its tail?); clamped below it"
	msgUnverifiedFrontier = "consumer offsets: legacy consumer.offset (no checksum) holds a frontier at or above " +
		"the log's high watermark; taken for damage: the partition starts afresh and delivers its retained records again"
	msgPrimeLate = "consumer offsets: priming new partitions holds back their first window: " +
		"a process crash would redeliver more than a tick of their acks"
	msgTickFailed = "consumer offsets: tick failed; retrying on the next tick"
	msgIgnored    = "consumer offsets: ignoring damaged or foreign persisted state; " +
		"records it would have settled are delivered again"
)

// warnEvery is how often each warning may be logged at most.
const warnEvery = time.Minute

// limiter lets one log line through per warnEvery, by the times the caller passes, and counts
// what it held back in between.
type limiter struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// allow reports whether to log now, and how many occurrences were held back since the last
// line that was logged.
func (l *limiter) allow(now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.last.IsZero() && now.Sub(l.last) < warnEvery {
		l.suppressed++
		return false, 0
	}
	n := l.suppressed
	l.last, l.suppressed = now, 0
	return true, n
}

// afterTick is Run's bookkeeping after a tick that ended at end and took took: the overrun
// warning (priming ticks do not count) and the rate-limited tick error.
func (c *Committer) afterTick(end time.Time, took time.Duration, rep tickReport, err error) {
	if took > c.period && !rep.primed {
		c.stats.overruns.Add(1)
		if ok, _ := c.warnOverrun.allow(end); ok {
			c.log.Warn(msgOverrun, "partitions", rep.partitions, "flush_took", took, "interval", c.period)
		}
	}
	if err != nil {
		if ok, n := c.warnTick.allow(end); ok {
			c.log.Warn(msgTickFailed, "error", err, "suppressed", n)
		}
	}
}

// warnLateWriteouts warns that writes waited more than twice the interval for their writeout.
func (c *Committer) warnLateWriteouts(partitions int, oldest time.Duration) {
	c.stats.lateWriteouts.Add(1)
	if ok, _ := c.warnLate.allow(c.t.now); ok {
		c.log.Warn(msgLate, "partitions", partitions, "oldest", oldest, "durability_interval", c.interval)
	}
}

// warnPrimeLate reports partitions whose first window waited more than one tick for its
// prime, the longest wait being ticks tick periods.
func (c *Committer) warnPrimeLate(partitions int, waited time.Duration) {
	if ok, n := c.warnPrime.allow(c.t.now); ok {
		c.log.Warn(msgPrimeLate, "partitions", partitions, "waited", waited,
			"interval", c.period, "suppressed", n)
	}
}

// noteDropped counts and reports a record too large for a slot: one line
// per kind of loss, each at most once a minute. Losing requeued offsets loses records, so it
// is an error; acked-ahead offsets are delivered again; quarantined ones become settled and
// attempts restart from zero.
func (c *Committer) noteDropped(p *partition, st *State, over Overflow) {
	now := c.t.now
	if over.Requeued > 0 {
		c.stats.droppedRequeued.Add(uint64(over.Requeued))
		if ok, n := c.warnDroppedRequeued.allow(now); ok {
			c.log.Error(msgDroppedRequeued, "topic", p.topic, "partition", p.num,
				"kept", len(st.Requeued)-over.Requeued, "dropped", over.Requeued, "suppressed", n)
		}
	}
	if over.Ahead > 0 {
		c.stats.dropped.Add(uint64(over.Ahead))
		if ok, n := c.warnDropped.allow(now); ok {
			c.log.Warn(msgDropped, "topic", p.topic, "partition", p.num, "kept", runsLen(st.Ahead)-int64(over.Ahead),
				"dropped", over.Ahead, "runs", len(st.Ahead), "suppressed", n)
		}
	}
	if over.Quarantine > 0 || over.Attempts > 0 {
		c.stats.droppedQuarantine.Add(uint64(over.Quarantine))
		c.stats.droppedAttempts.Add(uint64(over.Attempts))
		if ok, n := c.warnDroppedSets.allow(now); ok {
			c.log.Warn(msgDroppedSets, "topic", p.topic, "partition", p.num,
				"quarantine_kept", len(st.Quarantine)-over.Quarantine, "quarantine_dropped", over.Quarantine,
				"attempts_kept", len(st.Attempts)+st.OmittedAttempts-over.Attempts, "attempts_dropped", over.Attempts,
				"suppressed", n)
		}
	}
}
