package router

import (
	"fmt"

	"narad.dev/consume/internal/statedir"
)

// Where the partitions' states live: in the data directory, one directory per topic
// (TopicDir, TopicOfDir, a legacy name adopted, a deleted topic's removed), or with the host
// (Config.Store); statesInDir and hostKeepsStates say which. And the bounds of a topic's
// name (checkTopic).

// TopicDir is the name of the directory of Config.Dir that holds a topic's ack state, one
// directory per partition inside it named by the partition's number (see PartitionDir): for
// an operator's tool that finds a partition's files on a node that may not be running. It
// does not check the name (see MaxTopicLength).
func TopicDir(topic string) string { return statedir.TopicDir(topic) }

// TopicOfDir says whose state a directory of Config.Dir named name holds: the topic, and
// legacy true when name is the one a release before this one gave the topic's directory (a
// node moves such a directory to TopicDir(topic) at the topic's first touch, unless that one
// exists, which it then reads instead). ok is false for a name no topic has, among them the
// names of long topics, which end in a hash of the topic and do not give it back (a topic
// of an earlier release whose name ended so is taken for one of them).
func TopicOfDir(name string) (topic string, legacy, ok bool) {
	topic, legacy, ok = statedir.TopicOfDir(name)
	if !ok || checkTopic(topic) != nil {
		return "", false, false
	}
	return topic, legacy, true
}

// checkTopic refuses a topic name no node accepts: empty, or longer than MaxTopicLength.
func checkTopic(topic string) error {
	if topic == "" || len(topic) > MaxTopicLength {
		return fmt.Errorf("%w: topic name of %d bytes (1 to %d)", ErrInvalidArgument, len(topic), MaxTopicLength)
	}
	return nil
}

// checkPartition refuses a partition number no routes can name: a negative one. A call that
// names one is the caller's mistake (400), not a partition served elsewhere (ErrNotLocal, 503:
// try again).
func checkPartition(partition int32) error {
	if partition < 0 {
		return fmt.Errorf("%w: partition %d is negative", ErrInvalidArgument, partition)
	}
	return nil
}

// statesInDir reports whether the partitions' states live in the data directory
// (Config.Dir), kept by the node's file committer: each partition has a directory there,
// which the node creates, clears and marks (MovedFile). It is the contrary of
// hostKeepsStates.
func (n *Node) statesInDir() bool { return n.store == nil }

// hostKeepsStates reports whether the host keeps the partitions' states (Config.Store,
// through n.store's committer): there is no partition directory, and a fence that a file
// would hold lives in memory.
func (n *Node) hostKeepsStates() bool { return n.store != nil }

// adoptLegacyTopicDir moves a topic's directory from the name an earlier release gave it to
// its TopicDir name, at the topic's first touch, so an upgrade keeps the topic's ack state. A
// failed move is logged and the topic starts from its legacy state's absence: its records
// are delivered again, none skipped.
func (n *Node) adoptLegacyTopicDir(topic string) {
	if from, to, err := n.dir.AdoptLegacyTopic(topic); err != nil {
		n.logger.Error("consume: cannot move a topic's state directory to its new name; its records are delivered again",
			"topic", topic, "from", from, "to", to, "err", err)
	}
}

// removeTopicDir removes a deleted topic's state, under its name and under the name an
// earlier release gave it, so neither is read as the state of a topic created again.
func (n *Node) removeTopicDir(topic string) error {
	if n.hostKeepsStates() {
		return n.store.Delete(topic)
	}
	return n.dir.RemoveTopic(topic)
}
