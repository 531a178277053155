package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"strings"
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
//	Load    one Get
//	Save    one Txn per maxTxnOps entries: If(each entry's epoch key's mod revision <= its
//	        Epoch) Then(the puts) Else(get the epoch keys, to name the ones that refused). A
//	        batch is all or nothing per Txn, as the library's MemStore; etcd refuses a larger
//	        Txn (--max-txn-ops, 128 by default), and a batch that takes several Txns is not
//	        atomic, which the contract allows: after an error the node saves every entry of
//	        the batch again (one at a time, after a fenced refusal, to learn which it was)
//	Delete  one Delete of the topic's prefix of states (the epochs are the controller's)
//
// It is safe for concurrent use, as the etcd client is.
type etcdStore struct {
	cli    *clientv3.Client
	prefix string // of the states; ends with "/"
	epochs string // of the epoch keys; ends with "/"
}

// maxTxnOps is etcd's default bound on the operations of one Txn (embed.DefaultMaxTxnOps).
const maxTxnOps = 128

// txnTimeout bounds each Txn of a Save. etcd holds a proposal that was lost with its leader
// until its own request timeout (5 s + 2 election timeouts: 7 s by default); the node's
// committer waits up to 10 s for a Save. A Txn that fails sooner lets the committer's next
// save, one commit interval later, go to the new leader: a node's acks are durable again
// about a second after etcd has a leader, rather than seven. (A Txn timed out here may still
// be applied: it holds an older state than the next save's, and it is ordered before it in
// etcd's log, or lost; and it compares the epoch key like any other, so it never lands over
// a newer owner's state.)
const txnTimeout = time.Second

var _ router.StateStore = (*etcdStore)(nil)

func newEtcdStore(cli *clientv3.Client, prefix, epochs string) *etcdStore {
	return &etcdStore{cli: cli, prefix: prefix, epochs: epochs}
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

// Load returns the partition's stored state, or nil when there is none.
func (s *etcdStore) Load(ctx context.Context, topic string, partition int32) ([]byte, error) {
	resp, err := s.cli.Get(ctx, s.key(topic, partition))
	if err != nil {
		return nil, fmt.Errorf("etcd get: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return nil, nil
	}
	return append([]byte(nil), resp.Kvs[0].Value...), nil
}

// Save puts every entry's state, maxTxnOps to a Txn, each Txn only if no entry of it is
// fenced, and returns once etcd has committed them all.
func (s *etcdStore) Save(ctx context.Context, batch []router.PartitionState) error {
	for len(batch) > 0 {
		n := min(len(batch), maxTxnOps)
		cmps := make([]clientv3.Cmp, n)
		puts := make([]clientv3.Op, n)
		gets := make([]clientv3.Op, n)
		for i, e := range batch[:n] {
			ek := s.epochKey(e.Topic, e.Partition)
			// A missing key's mod revision is 0: every epoch passes.
			cmps[i] = clientv3.Compare(clientv3.ModRevision(ek), "<", clampEpoch(e.Epoch)+1)
			puts[i] = clientv3.OpPut(s.key(e.Topic, e.Partition), string(e.State))
			gets[i] = clientv3.OpGet(ek, clientv3.WithKeysOnly())
		}
		tctx, cancel := context.WithTimeout(ctx, txnTimeout)
		resp, err := s.cli.Txn(tctx).If(cmps...).Then(puts...).Else(gets...).Commit()
		cancel()
		if err != nil {
			return fmt.Errorf("etcd txn of %d puts: %w", n, err)
		}
		if !resp.Succeeded {
			return s.fenced(batch[:n], resp)
		}
		batch = batch[n:]
	}
	return nil
}

// clampEpoch is e as an etcd revision (an int64; no grant's epoch is larger).
func clampEpoch(e uint64) int64 { return int64(min(e, 1<<62)) }

// fenced is the error of a Txn whose comparisons failed: it names the entries whose epoch is
// below their epoch key's.
func (s *etcdStore) fenced(batch []router.PartitionState, resp *clientv3.TxnResponse) error {
	var parts []string
	for i, r := range resp.Responses {
		kvs := r.GetResponseRange().GetKvs()
		if i >= len(batch) || len(kvs) == 0 {
			continue
		}
		if e := batch[i]; kvs[0].ModRevision > clampEpoch(e.Epoch) {
			parts = append(parts, fmt.Sprintf("%s/%d saved under epoch %d, the partition is granted under epoch %d",
				e.Topic, e.Partition, e.Epoch, kvs[0].ModRevision))
		}
	}
	return fmt.Errorf("%w: %s", router.ErrFenced, strings.Join(parts, "; "))
}

// Delete removes every partition's state of topic.
func (s *etcdStore) Delete(ctx context.Context, topic string) error {
	if _, err := s.cli.Delete(ctx, s.prefix+topicPart(topic), clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("etcd delete prefix: %w", err)
	}
	return nil
}
