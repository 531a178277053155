package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"narad.dev/consume/router"
)

// etcdStore is a router.StateStore over etcd (Config.Store): each partition's ack state is
// one key, <states><topic, path-escaped>/<partition>, whose value is the bytes the node
// handed over (opaque here: the node verifies what Load answers). etcd replicates it to the
// members' quorum before a Txn returns, so a machine's loss loses no ack state the node
// counted as saved.
//
// It fences by ownership epoch, as a store shared by the nodes of a cluster must: each
// partition has an epoch key, <epochs><topic, path-escaped>/<partition>, which the
// controller puts in the same Txn that grants the partition to a node (the owner key), so
// that its mod revision is the newest grant's epoch (router.Grant.Epoch: the owner key's
// mod revision, the same revision). A save of an entry whose Epoch is below that mod revision
// is refused, with an error wrapping router.ErrFenced: it comes from an owner the partition
// was taken from (a node paused, or cut off, past its grant). The epoch key has no lease
// and is never deleted by a failover, so the epoch the store fences with only grows, even
// while the partition has no owner key (its owner's lease expired and the controller has not
// granted it anew yet). A partition without an epoch key (never granted: the conformance
// suite's) takes every save.
//
// And it never puts an older state over a newer one of its own: a save that timed out here
// may still be committed, seconds later and after the saves that followed it (a proposal a
// member forwarded to a raft leader that was paused is forwarded again to the next leader
// when that one continues, and committed then). So each save also compares the state key's
// mod revision with the one this store last saw of it (its Load, its last save, or a read
// when it does not know): a save that lands late finds the key moved on, and changes
// nothing. When the key moved on under a save that is not fenced (a save of this store's
// that landed late, or one whose answer was lost), the store reads the key's revision again
// and saves once more: the state it saves is the node's newest.
//
//	Load    one Get
//	Save    one Txn per txnEntries entries: If(each entry's epoch key's mod revision <= its
//	        Epoch, and its state key's mod revision = the one last seen) Then(the puts)
//	        Else(get the epoch and state keys). A batch is all or nothing per Txn, as the
//	        library's MemStore; etcd refuses a Txn of more than --max-txn-ops (128 by
//	        default) comparisons or operations, and a batch that takes several Txns is not
//	        atomic, which the contract allows: after an error the node saves every entry of
//	        the batch again (one at a time, after a fenced refusal, to learn which it was)
//	Delete  one Delete of the topic's prefix of states (the epochs are the controller's)
//
// It is safe for concurrent use, as the etcd client is.
type etcdStore struct {
	cli    *clientv3.Client
	prefix string // of the states; ends with "/"
	epochs string // of the epoch keys; ends with "/"

	mu    sync.Mutex
	revs  map[string]int64     // state key → its mod revision as this store last saw it (0: absent)
	saved map[string]time.Time // state key → when the last Save of it that etcd took was called
}

// maxTxnOps is etcd's default bound on the comparisons, and on the operations of each
// branch, of one Txn (embed.DefaultMaxTxnOps); txnEntries is how many entries a save puts
// in one Txn: two comparisons, and two reads in its else branch, each.
const (
	maxTxnOps  = 128
	txnEntries = maxTxnOps / 2
)

// txnTimeout bounds each Txn of a Save. etcd holds a proposal that was lost with its leader
// until its own request timeout (5 s + 2 election timeouts: 7 s by default); the node's
// committer waits up to 10 s for a Save. A Txn that fails sooner lets the committer's next
// save, one commit interval later, go to the new leader: a node's acks are durable again
// about a second after etcd has a leader, rather than seven. A Txn timed out here may still
// be committed, later than the saves that follow: its comparisons make it change nothing
// then (see etcdStore).
const txnTimeout = time.Second

var _ router.StateStore = (*etcdStore)(nil)

func newEtcdStore(cli *clientv3.Client, prefix, epochs string) *etcdStore {
	return &etcdStore{cli: cli, prefix: prefix, epochs: epochs, revs: map[string]int64{}, saved: map[string]time.Time{}}
}

// topicPart is the part of every key of topic after a prefix: the topic path-escaped (so it
// holds no "/", and two topics never share a prefix), then "/".
func topicPart(topic string) string { return url.PathEscape(topic) + "/" }

func (s *etcdStore) key(topic string, partition int32) string {
	return s.prefix + topicPart(topic) + strconv.FormatInt(int64(partition), 10)
}

// epochKey is the partition's epoch key: the controller puts it with every grant.
func (s *etcdStore) epochKey(topic string, partition int32) string {
	return s.epochs + topicPart(topic) + strconv.FormatInt(int64(partition), 10)
}

// seen records key's mod revision as read or written.
func (s *etcdStore) seen(key string, rev int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revs[key] = rev
}

// forget makes the store read key's mod revision again before its next save of it.
func (s *etcdStore) forget(keys ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		delete(s.revs, k)
	}
}

// lastSeen returns key's mod revision as this store last saw it, reading it if it does not
// know.
func (s *etcdStore) lastSeen(ctx context.Context, key string) (int64, error) {
	s.mu.Lock()
	rev, ok := s.revs[key]
	s.mu.Unlock()
	if ok {
		return rev, nil
	}
	resp, err := s.cli.Get(ctx, key, clientv3.WithKeysOnly())
	if err != nil {
		return 0, fmt.Errorf("etcd get: %w", err)
	}
	if len(resp.Kvs) > 0 {
		rev = resp.Kvs[0].ModRevision
	}
	s.seen(key, rev)
	return rev, nil
}

// Load returns the partition's stored state, or nil when there is none.
func (s *etcdStore) Load(ctx context.Context, topic string, partition int32) ([]byte, error) {
	k := s.key(topic, partition)
	resp, err := s.cli.Get(ctx, k)
	if err != nil {
		return nil, fmt.Errorf("etcd get: %w", err)
	}
	if len(resp.Kvs) == 0 {
		s.seen(k, 0)
		return nil, nil
	}
	s.seen(k, resp.Kvs[0].ModRevision)
	return append([]byte(nil), resp.Kvs[0].Value...), nil
}

// Save puts every entry's state, txnEntries to a Txn, each Txn only if no entry of it is
// fenced and no state key moved on since this store saw it, and returns once etcd has
// committed them all.
func (s *etcdStore) Save(ctx context.Context, batch []router.PartitionState) error {
	for len(batch) > 0 {
		n := min(len(batch), txnEntries)
		err := s.saveTxn(ctx, batch[:n])
		if errors.Is(err, errMovedOn) {
			err = s.saveTxn(ctx, batch[:n]) // with the revisions read again
		}
		if err != nil {
			return err
		}
		batch = batch[n:]
	}
	return nil
}

// errMovedOn: a state key's mod revision was not the one the store last saw.
var errMovedOn = errors.New("the stored state changed since this store last saw it")

// A saveOp is one Txn of a Save, built: its comparisons, puts and else-branch reads, and
// the state keys it puts.
type saveOp struct {
	cmps []clientv3.Cmp
	puts []clientv3.Op
	gets []clientv3.Op
	keys []string
}

// build builds batch's Txn against the revisions this store last saw.
func (s *etcdStore) build(ctx context.Context, batch []router.PartitionState) (saveOp, error) {
	op := saveOp{cmps: make([]clientv3.Cmp, 0, 2*len(batch)), puts: make([]clientv3.Op, 0, len(batch)),
		gets: make([]clientv3.Op, 0, 2*len(batch)), keys: make([]string, 0, len(batch))}
	for _, e := range batch {
		k, ek := s.key(e.Topic, e.Partition), s.epochKey(e.Topic, e.Partition)
		rev, err := s.lastSeen(ctx, k)
		if err != nil {
			return op, err
		}
		// A missing key's mod revision is 0: every epoch passes, and a state never saved
		// is one this store saw as absent.
		op.cmps = append(op.cmps, clientv3.Compare(clientv3.ModRevision(ek), "<", clampEpoch(e.Epoch)+1),
			clientv3.Compare(clientv3.ModRevision(k), "=", rev))
		op.puts = append(op.puts, clientv3.OpPut(k, string(e.State)))
		op.gets = append(op.gets, clientv3.OpGet(ek, clientv3.WithKeysOnly()), clientv3.OpGet(k, clientv3.WithKeysOnly()))
		op.keys = append(op.keys, k)
	}
	return op, nil
}

// lastSaved returns when this store was last called to save the partition's state and etcd
// took it: the node took the state just before, so every ack applied earlier is in etcd.
func (s *etcdStore) lastSaved(topic string, partition int32) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.saved[s.key(topic, partition)]
	return t, ok
}

// saveTxn saves batch in one Txn.
func (s *etcdStore) saveTxn(ctx context.Context, batch []router.PartitionState) error {
	called := time.Now()
	op, err := s.build(ctx, batch)
	if err != nil {
		return err
	}
	tctx, cancel := context.WithTimeout(ctx, txnTimeout)
	resp, err := s.cli.Txn(tctx).If(op.cmps...).Then(op.puts...).Else(op.gets...).Commit()
	cancel()
	if err != nil {
		s.forget(op.keys...) // it may be committed yet, or not
		return fmt.Errorf("etcd txn of %d puts: %w", len(batch), err)
	}
	if resp.Succeeded {
		s.mu.Lock()
		for _, k := range op.keys {
			s.revs[k], s.saved[k] = resp.Header.Revision, called
		}
		s.mu.Unlock()
		return nil
	}
	return s.refused(batch, op.keys, resp)
}

// clampEpoch is e as an etcd revision (an int64; no grant's epoch is larger).
func clampEpoch(e uint64) int64 { return int64(min(e, 1<<62)) }

// refused is the error of a Txn whose comparisons failed: router.ErrFenced naming the
// entries whose epoch is below their epoch key's, or else errMovedOn, the state keys'
// revisions noted as read.
func (s *etcdStore) refused(batch []router.PartitionState, keys []string, resp *clientv3.TxnResponse) error {
	var fenced []string
	for i, e := range batch {
		if 2*i+1 >= len(resp.Responses) {
			break
		}
		if kvs := resp.Responses[2*i].GetResponseRange().GetKvs(); len(kvs) > 0 && kvs[0].ModRevision > clampEpoch(e.Epoch) {
			fenced = append(fenced, fmt.Sprintf("%s/%d saved under epoch %d, the partition is granted under epoch %d",
				e.Topic, e.Partition, e.Epoch, kvs[0].ModRevision))
		}
		rev := int64(0)
		if kvs := resp.Responses[2*i+1].GetResponseRange().GetKvs(); len(kvs) > 0 {
			rev = kvs[0].ModRevision
		}
		s.seen(keys[i], rev)
	}
	if len(fenced) > 0 {
		return fmt.Errorf("%w: %s", router.ErrFenced, strings.Join(fenced, "; "))
	}
	return fmt.Errorf("etcd txn of %d puts: %w", len(batch), errMovedOn)
}

// Delete removes every partition's state of topic.
func (s *etcdStore) Delete(ctx context.Context, topic string) error {
	prefix := s.prefix + topicPart(topic)
	_, err := s.cli.Delete(ctx, prefix, clientv3.WithPrefix())
	s.mu.Lock()
	for k := range s.revs {
		if strings.HasPrefix(k, prefix) {
			delete(s.revs, k) // read again: deleted, or maybe not
		}
	}
	s.mu.Unlock()
	if err != nil {
		return fmt.Errorf("etcd delete prefix: %w", err)
	}
	return nil
}
