package main

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"narad.dev/consume/router"
)

// etcdStore is a router.StateStore over etcd (Config.Store): each partition's ack state is
// one key, <prefix><topic, path-escaped>/<partition>, whose value is the bytes the node
// handed over (opaque here: the node verifies what Load answers). etcd replicates it to the
// members' quorum before a Txn returns, so a machine's loss loses no ack state the node
// counted as saved.
//
//	Load    one Get
//	Save    one Txn of puts per maxTxnOps entries (etcd refuses a larger Txn: --max-txn-ops,
//	        128 by default); a batch that takes several Txns is not atomic, which the contract
//	        allows: after an error the node saves every entry of the batch again
//	Delete  one Delete of the topic's prefix
//
// It is safe for concurrent use, as the etcd client is.
type etcdStore struct {
	cli    *clientv3.Client
	prefix string // ends with "/"
}

// maxTxnOps is etcd's default bound on the operations of one Txn (embed.DefaultMaxTxnOps).
const maxTxnOps = 128

// txnTimeout bounds each Txn of a Save. etcd holds a proposal that was lost with its leader
// until its own request timeout (5 s + 2 election timeouts: 7 s by default); the node's
// committer waits up to 10 s for a Save. A Txn that fails sooner lets the committer's next
// save, one commit interval later, go to the new leader: a node's acks are durable again
// about a second after etcd has a leader, rather than seven. (A Txn timed out here may still
// be applied: it holds an older state than the next save's, and it is ordered before it in
// etcd's log, or lost.)
const txnTimeout = time.Second

var _ router.StateStore = (*etcdStore)(nil)

func newEtcdStore(cli *clientv3.Client, prefix string) *etcdStore {
	return &etcdStore{cli: cli, prefix: prefix}
}

// topicPrefix is the prefix of every key of topic: the topic path-escaped (so it holds no
// "/", and two topics never share a prefix), then "/".
func (s *etcdStore) topicPrefix(topic string) string {
	return s.prefix + url.PathEscape(topic) + "/"
}

func (s *etcdStore) key(topic string, partition int32) string {
	return s.topicPrefix(topic) + strconv.FormatInt(int64(partition), 10)
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

// Save puts every entry's state, maxTxnOps to a Txn, and returns once etcd has committed
// them all.
func (s *etcdStore) Save(ctx context.Context, batch []router.PartitionState) error {
	for len(batch) > 0 {
		n := min(len(batch), maxTxnOps)
		ops := make([]clientv3.Op, n)
		for i, e := range batch[:n] {
			ops[i] = clientv3.OpPut(s.key(e.Topic, e.Partition), string(e.State))
		}
		tctx, cancel := context.WithTimeout(ctx, txnTimeout)
		_, err := s.cli.Txn(tctx).Then(ops...).Commit()
		cancel()
		if err != nil {
			return fmt.Errorf("etcd txn of %d puts: %w", n, err)
		}
		batch = batch[n:]
	}
	return nil
}

// Delete removes every partition's state of topic.
func (s *etcdStore) Delete(ctx context.Context, topic string) error {
	if _, err := s.cli.Delete(ctx, s.topicPrefix(topic), clientv3.WithPrefix()); err != nil {
		return fmt.Errorf("etcd delete prefix: %w", err)
	}
	return nil
}
