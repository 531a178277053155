package main

import (
	"narad.dev/consume/router"
	"narad.dev/consume/router/sqsapi"
)

// topicConfigOf is the node's settings of a queue's topic.
func topicConfigOf(rec sqsapi.QueueRecord) router.TopicConfig {
	return router.TopicConfig{}
}

// onQuarantine is the node's Config.OnQuarantine.
func (s *server) onQuarantine(topic string, partition int32, offset int64, attempts uint32) {}
