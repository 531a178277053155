package filequeue

import (
	"errors"
	"os"
	"path/filepath"

	"narad.dev/consume/examples/filelog"
	"narad.dev/consume/router"
)

// A Queue is one topic of a file log and the node that consumes it.
type Queue struct {
	Store *filelog.Store
	Node  *router.Node
	topic string
}

// Open opens (or creates) the queue whose state is in dir, with topic's partitions, and a
// node over it configured by cfg: Open sets its Logs, Routes and Dir (every partition is the
// node's), the rest is the caller's (Topic, OnQuarantine, ...).
func Open(dir, topic string, partitions int, cfg router.Config) (*Queue, error) {
	q := &Queue{topic: topic}
	store, err := filelog.Open(filepath.Join(dir, "log"), filelog.Options{
		SegmentBytes: 256 << 10,
		// Each append tells the node, which wakes a parked consumer if there is one.
		// q.Node is set below, before anything is appended.
		OnAppend: func(topic string, p int32, hwm int64) { q.Node.Appended(topic, p, hwm) },
	})
	if err != nil {
		return nil, err
	}
	if err := store.CreateTopic(topic, partitions); err != nil {
		store.Close()
		return nil, err
	}
	cfg.Logs = store   // the store resolves partitions' logs...
	cfg.Routes = store // ...and says every partition is this node's
	cfg.Dir = filepath.Join(dir, "consumer")
	node, err := router.New(cfg)
	if err != nil {
		store.Close()
		return nil, err
	}
	q.Store, q.Node = store, node
	return q, nil
}

// Close closes the node first (it persists every ack and stops reading the log), then the
// log.
func (q *Queue) Close() error {
	return errors.Join(q.Node.Close(), q.Store.Close())
}

// RequireEmpty refuses a state directory that already holds records of the topic: a run
// that counts what it consumed against what it produced needs to start from none. what
// names them in the error ("messages", "records").
func (q *Queue) RequireEmpty(what string) error {
	local, _, _ := q.Store.Partitions(q.topic)
	for _, p := range local {
		if l, err := q.Store.Log(q.topic, p); err == nil && l.HighWatermark() > 0 {
			return errors.New("the state directory holds an earlier run's " + what + ": give -dir an empty or new directory")
		}
	}
	return nil
}

// StateDir returns the directory to keep a run's state in (dir, or a new temporary one named
// after pattern when dir is empty), and what to do with it at the end.
func StateDir(dir, pattern string) (path string, cleanup func(), err error) {
	if dir != "" {
		return dir, func() {}, os.MkdirAll(dir, 0o755)
	}
	dir, err = os.MkdirTemp("", pattern)
	return dir, func() { os.RemoveAll(dir) }, err
}

// StateNote says what becomes of the state directory dir names (StateDir's argument).
func StateNote(dir string) string {
	if dir == "" {
		return "a temporary directory, removed at the end"
	}
	return "kept"
}
