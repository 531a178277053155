package main

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"narad.dev/consume/examples/filelog"
	"narad.dev/consume/router/sqsapi"
)

// catalogName is the catalogue's file in the data directory; catalogTemp is where a new
// version is written before it replaces the old.
const (
	catalogName = "queues.json"
	catalogTemp = "queues.json.tmp"
)

// catalogMagic begins the catalogue's first line, followed by the CRC-32C of the rest of the
// file (the JSON) in hex: a file cut short, or with a bit flipped, is refused at start.
const catalogMagic = "sqsd-queues v1 crc32c="

// errCorruptCatalog marks a catalogue file that cannot be read back: the server refuses to
// start rather than run without queues it had.
var errCorruptCatalog = errors.New("sqsd: queue catalogue damaged")

// A catalog is the server's QueueStore: the queues, their attributes and tags, in one file
// of the data directory, written whole to a temporary file, fsynced and renamed over the
// old one (and the directory fsynced) on every change, so that a crash leaves the old
// version or the new, never a mix. Each queue's messages are a topic of the file log whose
// name is the queue's and the time of its creation ("orders~lx3k2..."), so a queue
// deleted, or purged, and created again never sees the records of its former life: the
// topic of a deleted (or purged) life is listed in the file until the next start removes
// its files, and nothing routes to it meanwhile.
type catalog struct {
	dir        string // the data directory
	partitions int    // of a new queue's topic

	// Hooks into the log and the node, set before the first request.
	createTopic func(topic string, partitions int) error
	dropTopic   func(topic string) error // the node's DeleteTopic; the files go at the next start
	changed     func(topic string)       // a queue's attributes changed: the node reloads its topic

	// Cluster mode (see cluster.go), set before the first request. mirror, on a node other
	// than the home, forwards the writes to the home and keeps the catalogue a copy of the
	// home's; noPurge leaves PurgeQueue to the node, which purges across the owners.
	// announce, at the home, tells the other nodes of a change once it is on disk.
	mirror   *catalogMirror
	noPurge  bool
	announce func(ctx context.Context)

	writes sync.Mutex // serializes the changes and the file's writes
	mu     sync.RWMutex
	file   catalogFile
	topics map[string]string // live topic → queue name
	gen    uint64            // commits since the start: a mirror applies no older snapshot
	now    func() time.Time
}

// catalogFile is the catalogue as it is written.
type catalogFile struct {
	Queues map[string]catalogQueue `json:"queues"`
	// Dropped are the topics of deleted and purged queues whose files are still to remove.
	Dropped []string `json:"dropped,omitempty"`
	// ID names the cluster's catalogue (cluster mode only): made by the home at its first
	// start in cluster mode, and kept by every node's copy, so that a node refuses the
	// catalogue of a home started on another directory (an empty one would drop every
	// queue).
	ID string `json:"id,omitempty"`
}

type catalogQueue struct {
	Record     sqsapi.QueueRecord `json:"record"`
	Partitions int                `json:"partitions"`
}

var (
	_ sqsapi.QueueStore  = (*catalog)(nil)
	_ sqsapi.QueuePurger = (*catalog)(nil)
)

// openCatalog reads the catalogue of dir, or starts an empty one when there is none yet. A
// catalogue that is there and cannot be read is an error matching errCorruptCatalog.
func openCatalog(dir string, partitions int) (*catalog, error) {
	c := &catalog{dir: dir, partitions: partitions, now: time.Now, topics: map[string]string{}}
	data, err := os.ReadFile(filepath.Join(dir, catalogName))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		c.file.Queues = map[string]catalogQueue{}
		return c, nil
	case err != nil:
		return nil, err
	}
	file, err := decodeCatalog(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v (restore it from a backup, or move it away to start with no queues)", errCorruptCatalog, filepath.Join(dir, catalogName), err)
	}
	c.file = file
	for name, q := range file.Queues {
		c.topics[q.Record.Topic] = name
	}
	return c, nil
}

// decodeCatalog checks and decodes a catalogue file.
func decodeCatalog(data []byte) (catalogFile, error) {
	var file catalogFile
	if err := decodeChecked(catalogMagic, data, &file); err != nil {
		return file, err
	}
	if file.Queues == nil {
		file.Queues = map[string]catalogQueue{}
	}
	for name, q := range file.Queues {
		if q.Record.Topic == "" || q.Partitions < 1 {
			return file, fmt.Errorf("queue %q has no topic or partitions", name)
		}
	}
	return file, nil
}

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// encodeCatalog is what decodeCatalog reads.
func encodeCatalog(file catalogFile) ([]byte, error) {
	return encodeChecked(catalogMagic, file)
}

// save writes file as the catalogue: a temporary file fsynced, renamed over the old, and the
// directory fsynced. Called with c.writes held.
func (c *catalog) save(file catalogFile) error {
	data, err := encodeCatalog(file)
	if err != nil {
		return err
	}
	return writeFileAtomic(c.dir, catalogName, catalogTemp, data, 0o600)
}

// writeFileAtomic replaces dir/name with data durably: written to dir/temp, fsynced,
// renamed, and the directory fsynced.
func writeFileAtomic(dir, name, temp string, data []byte, perm os.FileMode) error {
	tmp := filepath.Join(dir, temp)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return filelog.SyncDir(dir)
}

// commit saves next as the catalogue and makes it the one served. Called with c.writes
// held; an error changes nothing.
func (c *catalog) commit(next catalogFile) error {
	if err := c.save(next); err != nil {
		return err
	}
	topics := make(map[string]string, len(next.Queues))
	for name, q := range next.Queues {
		topics[q.Record.Topic] = name
	}
	c.mu.Lock()
	c.file, c.topics = next, topics
	c.gen++
	c.mu.Unlock()
	return nil
}

// next is a copy of the catalogue to change. Called with c.writes held.
func (c *catalog) next() catalogFile {
	c.mu.RLock()
	defer c.mu.RUnlock()
	next := catalogFile{Queues: make(map[string]catalogQueue, len(c.file.Queues)+1), Dropped: slices.Clone(c.file.Dropped), ID: c.file.ID}
	for name, q := range c.file.Queues {
		next.Queues[name] = q
	}
	return next
}

// newTopic names the topic of a new life of queue name.
func (c *catalog) newTopic(name string) string {
	return name + "~" + strconv.FormatInt(c.now().UnixNano(), 36)
}

// Queue implements sqsapi.QueueStore. A mirror that misses asks the home first (a queue
// just created through another node).
func (c *catalog) Queue(name string) (sqsapi.QueueRecord, bool) {
	rec, ok := c.lookup(name)
	if !ok && c.mirror != nil && c.mirror.refreshOnMiss() {
		rec, ok = c.lookup(name)
	}
	return rec, ok
}

// lookup is Queue of the catalogue as it is.
func (c *catalog) lookup(name string) (sqsapi.QueueRecord, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	q, ok := c.file.Queues[name]
	return q.Record, ok
}

// partitionsOf returns the partitions of topic, a queue's live topic; ok false for a topic
// that is none.
func (c *catalog) partitionsOf(topic string) (int, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	name, ok := c.topics[topic]
	if !ok {
		return 0, false
	}
	return c.file.Queues[name].Partitions, true
}

// queueOfTopic returns the name and record of the queue whose messages topic holds.
func (c *catalog) queueOfTopic(topic string) (string, sqsapi.QueueRecord, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	name, ok := c.topics[topic]
	if !ok {
		return "", sqsapi.QueueRecord{}, false
	}
	return name, c.file.Queues[name].Record, true
}

// wasDropped reports whether topic is the topic of a queue deleted since the last start.
func (c *catalog) wasDropped(topic string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Contains(c.file.Dropped, topic)
}

// live reports whether topic is a queue's topic now.
func (c *catalog) live(topic string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	_, ok := c.topics[topic]
	return ok
}

// PutQueue implements sqsapi.QueueStore. A new queue is written to the catalogue before its
// topic is created in the log, so a crash or an error in between leaves a queue whose topic
// the next PutQueue or start creates (its CreateQueue answered the error), never a topic no
// queue names.
func (c *catalog) PutQueue(ctx context.Context, name string, change func(rec sqsapi.QueueRecord, exists bool) (sqsapi.QueueRecord, error)) (sqsapi.QueueRecord, error) {
	if c.mirror != nil {
		return c.mirror.put(ctx, name, change)
	}
	rec, err := c.putHere(ctx, name, change)
	if err == nil && c.announce != nil {
		c.announce(ctx)
	}
	return rec, err
}

// putHere is PutQueue at the catalogue's own file.
func (c *catalog) putHere(ctx context.Context, name string, change func(rec sqsapi.QueueRecord, exists bool) (sqsapi.QueueRecord, error)) (sqsapi.QueueRecord, error) {
	c.writes.Lock()
	defer c.writes.Unlock()
	next := c.next()
	old, exists := next.Queues[name]
	rec, err := change(old.Record, exists)
	if err != nil {
		return sqsapi.QueueRecord{}, err
	}
	q := catalogQueue{Record: rec, Partitions: old.Partitions}
	if !exists {
		if q.Record.Topic == "" {
			q.Record.Topic = c.newTopic(name)
		}
		q.Partitions = c.partitions
	}
	next.Queues[name] = q
	if err := c.commit(next); err != nil {
		return sqsapi.QueueRecord{}, err
	}
	// The topic, made sure of every time (a no-op once it exists): a creation whose topic
	// failed is completed by the next change of the queue (CreateQueue again), or the next
	// start.
	if err := c.createTopic(q.Record.Topic, q.Partitions); err != nil {
		return sqsapi.QueueRecord{}, err
	}
	if exists && c.changed != nil {
		c.changed(q.Record.Topic)
	}
	return q.Record, nil
}

// DeleteQueue implements sqsapi.QueueStore.
func (c *catalog) DeleteQueue(ctx context.Context, name string) error {
	if c.mirror != nil {
		return c.mirror.delete(ctx, name)
	}
	err := c.deleteHere(ctx, name)
	if err == nil && c.announce != nil {
		c.announce(ctx)
	}
	return err
}

// deleteHere is DeleteQueue at the catalogue's own file.
func (c *catalog) deleteHere(ctx context.Context, name string) error {
	c.writes.Lock()
	defer c.writes.Unlock()
	next := c.next()
	q, ok := next.Queues[name]
	if !ok {
		return fmt.Errorf("%w: %q", sqsapi.ErrQueueNotFound, name)
	}
	delete(next.Queues, name)
	next.Dropped = append(next.Dropped, q.Record.Topic)
	if err := c.commit(next); err != nil {
		return err
	}
	return c.dropTopic(q.Record.Topic)
}

// PurgeQueue implements sqsapi.QueuePurger: the queue moves to a new, empty topic, durably,
// and the old one is dropped (its files go at the next start). A message sent while the
// purge runs may land in either, as SQS allows ("messages sent to the queue while it is
// being purged might be deleted").
//
// In cluster mode it answers errors.ErrUnsupported, which leaves the purge to the node
// (router.Node.PurgeQueue): the topic stays, and every owner settles its partitions' records.
func (c *catalog) PurgeQueue(ctx context.Context, name string, _ sqsapi.QueueRecord) error {
	if c.noPurge {
		return fmt.Errorf("sqsd: a cluster purges through its nodes: %w", errors.ErrUnsupported)
	}
	c.writes.Lock()
	defer c.writes.Unlock()
	next := c.next()
	q, ok := next.Queues[name]
	if !ok {
		return fmt.Errorf("%w: %q", sqsapi.ErrQueueNotFound, name)
	}
	old := q.Record.Topic
	q.Record.Topic = c.newTopic(name)
	next.Queues[name] = q
	next.Dropped = append(next.Dropped, old)
	if err := c.commit(next); err != nil {
		return err
	}
	if err := c.createTopic(q.Record.Topic, q.Partitions); err != nil {
		return err // the next PutQueue of the queue, or the next start, creates it
	}
	return c.dropTopic(old)
}

// ListQueues implements sqsapi.QueueStore.
func (c *catalog) ListQueues(prefix string) []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var names []string
	for name := range c.file.Queues {
		if strings.HasPrefix(name, prefix) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// dropped returns the topics whose files are still to remove.
func (c *catalog) dropped() []string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.Clone(c.file.Dropped)
}

// forgetDropped takes topics off the list of those to remove, once they are removed.
func (c *catalog) forgetDropped(topics []string) error {
	c.writes.Lock()
	defer c.writes.Unlock()
	next := c.next()
	next.Dropped = slices.DeleteFunc(next.Dropped, func(t string) bool { return slices.Contains(topics, t) })
	if len(next.Dropped) == len(c.file.Dropped) {
		return nil
	}
	return c.commit(next)
}

// queues returns every queue's topic and partitions.
func (c *catalog) queues() map[string]int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[string]int, len(c.file.Queues))
	for _, q := range c.file.Queues {
		out[q.Record.Topic] = q.Partitions
	}
	return out
}
