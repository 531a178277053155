package main

import (
	"context"

	"narad.dev/consume/router"
	"narad.dev/consume/router/sqsapi"
)

// topicConfigOf is the node's settings of a queue's topic: its RedrivePolicy's
// maxReceiveCount as the topic's MaxDeliveries, so that the node quarantines a message
// received that many times without a delete, and onQuarantine moves it to the dead-letter
// queue.
func topicConfigOf(rec sqsapi.QueueRecord) router.TopicConfig {
	return router.TopicConfig{MaxDeliveries: sqsapi.MaxDeliveries(rec)}
}

// onQuarantine is the node's Config.OnQuarantine: a record of a queue with a RedrivePolicy
// that reached its maxReceiveCount is read from the log and produced into the dead-letter
// queue (sqsapi.Handler.DeadLetter), on the goroutine that ended its last lease.
//
// The record stays in the source partition's quarantine (the node cannot settle a
// quarantined record for good), and a crash between the quarantine reaching the disk and the
// dead-letter queue's append leaves it there without a copy in the dead-letter queue (the
// log says so; router.Node.Requeue brings it back).
func (s *server) onQuarantine(topic string, partition int32, offset int64, attempts uint32) {
	if s.api == nil {
		return
	}
	log, err := s.store.Log(topic, partition)
	var rec router.Record
	if err == nil {
		rec, err = log.Read(offset)
	}
	var dlq string
	if err == nil {
		dlq, err = s.api.DeadLetter(context.Background(), topic, rec)
	}
	switch {
	case err != nil:
		s.logger.Error("sqsd: a message that reached its queue's maxReceiveCount could not be moved to the dead-letter queue; it stays quarantined",
			"topic", topic, "partition", partition, "offset", offset, "receives", attempts, "err", err)
	case dlq != "":
		s.logger.Info("sqsd: message moved to its dead-letter queue", "topic", topic, "partition", partition, "offset", offset, "receives", attempts, "dlq", dlq)
	}
}
