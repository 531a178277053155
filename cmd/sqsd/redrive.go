package main

import (
	"context"
	"errors"

	"narad.dev/consume/router"
	"narad.dev/consume/router/sqsapi"
)

// onQuarantine is the node's Config.OnQuarantine: a record of a queue with a RedrivePolicy
// that reached its maxReceiveCount is moved to the dead-letter queue (redrive), on the
// goroutine that ended its last lease.
func (s *server) onQuarantine(topic string, partition int32, offset int64, attempts uint32) {
	if s.api == nil {
		return // openServer's pass over the quarantines moves it (redriveQuarantined)
	}
	s.redrive(topic, partition, offset, attempts)
}

// redrive moves a quarantined record to its queue's dead-letter queue: it is read from the
// log and produced into the dead-letter queue (sqsapi.Handler.DeadLetter) first, and only
// then settled for good in the source partition (router.Node.Discard). A crash between the
// two leaves the record quarantined, and the next start copies it again
// (redriveQuarantined): a moved message is in the dead-letter queue at least once, never
// lost (with -fsync; without it, an append the page cache held is lost to a power cut, as
// any send is). A record that cannot be copied (its dead-letter queue was deleted, the log
// failed) stays quarantined, and is tried again at the next start. A record of a queue with
// no RedrivePolicy (it was removed) stays quarantined too. attempts is 0 when the count is
// not known (at start).
func (s *server) redrive(topic string, partition int32, offset int64, attempts uint32) {
	log, err := s.store.Log(topic, partition)
	var rec router.Record
	if err == nil {
		rec, err = log.Read(offset)
	}
	var dlq string
	if err == nil {
		dlq, err = s.api.DeadLetter(context.Background(), topic, rec)
	}
	var discarded bool
	if err == nil && dlq != "" {
		discarded, err = s.node.Discard(topic, partition, offset)
	}
	switch {
	case errors.Is(err, router.ErrClosed):
		// The server is stopping: the record stays quarantined for the next start.
	case err != nil:
		s.logger.Error("sqsd: a message that reached its queue's maxReceiveCount could not be moved to the dead-letter queue; it stays quarantined, and the next start tries again",
			"topic", topic, "partition", partition, "offset", offset, "receives", attempts, "err", err)
	case dlq != "" && !discarded:
		// Requeued or moved meanwhile (a copy too many in the dead-letter queue: at least
		// once). Only a discard of a quarantined record answers true.
		s.logger.Warn("sqsd: a message copied to its dead-letter queue was no longer quarantined",
			"topic", topic, "partition", partition, "offset", offset, "dlq", dlq)
	case dlq != "":
		s.logger.Info("sqsd: message moved to its dead-letter queue", "topic", topic, "partition", partition, "offset", offset, "receives", attempts, "dlq", dlq)
	}
}

// redriveQuarantined moves to their dead-letter queues the records still quarantined in
// the queues' partitions: those a crash (or a failed copy) left between the quarantine and
// the discard. It runs at start, before the server serves; a record whose queue has no
// RedrivePolicy stays quarantined.
func (s *server) redriveQuarantined() error {
	for topic := range s.cat.queues() {
		if _, rec, ok := s.cat.queueOfTopic(topic); !ok || sqsapi.MaxDeliveries(rec) == 0 {
			continue
		}
		for _, p := range s.localPartitions(topic) {
			offsets, err := s.node.Quarantined(topic, p)
			if err != nil {
				return err
			}
			for _, off := range offsets {
				s.redrive(topic, p, off, 0)
			}
		}
	}
	return nil
}
