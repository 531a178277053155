package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// The keys the example keeps in etcd.
const (
	keyRoot       = "/failover/"
	nodesPrefix   = keyRoot + "nodes/"      // nodes/<id> → its address; under the node's lease
	assignPrefix  = keyRoot + "assign/"     // assign/<topic>/<partition> → the owner's id
	movePrefix    = keyRoot + "move/"       // move/<topic>/<partition> → the node to move it to
	ownerPrefix   = keyRoot + "owner/"      // owner/<topic>/<partition> → the node granted it; under that node's lease
	epochPrefix   = keyRoot + "epoch/"      // epoch/<topic>/<partition>: its mod revision is the partition's newest epoch (etcdStore fences with it)
	statePrefix   = keyRoot + "state/"      // state/<topic>/<partition> → its ack state (etcdStore)
	electionName  = keyRoot + "controller/" // the controller's election
	haltKey       = keyRoot + "halt"        // set: the controller changes nothing (a planned stop)
	etcdStartWait = 30 * time.Second
)

func nodeKey(id string) string { return nodesPrefix + id }

func assignKey(topic string, p int32) string { return fmt.Sprintf("%s%s/%d", assignPrefix, topic, p) }

func moveKey(topic string, p int32) string { return fmt.Sprintf("%s%s/%d", movePrefix, topic, p) }

func ownerKey(topic string, p int32) string { return fmt.Sprintf("%s%s/%d", ownerPrefix, topic, p) }

// A member is one etcd member of the cluster, as the config lays it out.
type member struct {
	Name      string `json:"name"`
	ClientURL string `json:"client_url"`
	PeerURL   string `json:"peer_url"`
	Dir       string `json:"dir"`
}

// startMember starts the embedded etcd member m of the cluster initial ("name=peerURL,...")
// and waits until it serves: with a quorum of the initial cluster up, the members elect a
// leader. Its logs (warnings and up) go to logPath, or nowhere when it is empty.
func startMember(m member, initial, logPath string) (*embed.Etcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = m.Name
	cfg.Dir = m.Dir
	cu, err := url.Parse(m.ClientURL)
	if err != nil {
		return nil, err
	}
	pu, err := url.Parse(m.PeerURL)
	if err != nil {
		return nil, err
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = initial
	cfg.InitialClusterToken = "failover-example"
	cfg.ClusterState = embed.ClusterStateFlagNew
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{"/dev/null"}
	if logPath != "" {
		cfg.LogOutputs = []string{logPath}
	}
	cfg.MaxTxnOps = maxTxnOps
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd member %s: %w", m.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
		return e, nil
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("etcd member %s: %w", m.Name, err)
	case <-time.After(etcdStartWait):
		e.Server.Stop()
		e.Close()
		return nil, fmt.Errorf("etcd member %s: not ready within %v (are the other members up?)", m.Name, etcdStartWait)
	}
}

// initialCluster is etcd's --initial-cluster for members.
func initialCluster(members []member) string {
	parts := make([]string, len(members))
	for i, m := range members {
		parts[i] = m.Name + "=" + m.PeerURL
	}
	return strings.Join(parts, ",")
}

// newClient returns an etcd client of endpoints, its own logs discarded.
func newClient(endpoints ...string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
}

// memberDir is where member name keeps its data, under the run's directory.
func memberDir(dir, name string) string { return filepath.Join(dir, name, "etcd") }

// errHalted: the cluster is being stopped (haltKey is set).
var errHalted = errors.New("halted")

// halted reports whether haltKey is set.
func halted(ctx context.Context, cli *clientv3.Client) (bool, error) {
	resp, err := cli.Get(ctx, haltKey, clientv3.WithCountOnly())
	if err != nil {
		return false, err
	}
	return resp.Count > 0, nil
}
