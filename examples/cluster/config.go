package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"narad.dev/consume/examples/internal/launch"
	"narad.dev/consume/router"
)

// A clusterConfig is the one file every node reads at start: who the nodes are, where they
// listen, and which partitions of the topic each owns. It stands for what a host's own
// cluster hands its nodes (its consensus or metadata store): here it is static, and a node
// started again reads the same file.
type clusterConfig struct {
	Topic string `json:"topic"`
	// Visibility is the topic's visibility timeout, a Go duration ("2s").
	Visibility launch.Duration `json:"visibility"`
	// AckedAhead is the topic's acked-ahead cap per partition (router.TopicConfig).
	AckedAhead int          `json:"acked_ahead"`
	Nodes      []nodeConfig `json:"nodes"`
}

// A nodeConfig is one node of the cluster.
type nodeConfig struct {
	// Its ID, its HTTP server's address (for peers, /node, and clients, /queue), and Dir,
	// which holds its state: Dir/log the file log of its partitions, Dir/consumer the ack
	// state.
	launch.Node
	// Partitions are the partitions of the topic it owns; none makes it a gateway.
	Partitions []int32 `json:"partitions"`
}

// newClusterConfig lays out the three nodes in dir: node-1 and node-2 own two partitions
// each, node-3 owns none. Their addresses are ports free on 127.0.0.1 now.
func newClusterConfig(dir string, visibility time.Duration) (clusterConfig, error) {
	addrs, err := launch.FreeAddrs(3)
	if err != nil {
		return clusterConfig{}, err
	}
	owned := [][]int32{{0, 1}, {2, 3}, {}}
	cc := clusterConfig{Topic: topic, Visibility: launch.Duration(visibility)}
	for i, parts := range owned {
		id := fmt.Sprintf("node-%d", i+1)
		cc.Nodes = append(cc.Nodes, nodeConfig{Node: launch.Node{ID: id, Addr: addrs[i], Dir: filepath.Join(dir, id)}, Partitions: parts})
	}
	return cc, nil
}

// readConfig reads the config file at path, and the node id of it.
func readConfig(path, id string) (cc clusterConfig, self nodeConfig, err error) {
	if err := launch.ReadJSON(path, &cc); err != nil {
		return cc, self, err
	}
	if cc.Topic == "" || len(cc.Nodes) == 0 {
		return cc, self, fmt.Errorf("%s: no topic or no nodes", path)
	}
	self, err = launch.NodeOf(cc.Nodes, id)
	return cc, self, err
}

// partitions returns every partition of the topic, ascending.
func (cc clusterConfig) partitions() []int32 {
	var all []int32
	for _, n := range cc.Nodes {
		all = append(all, n.Partitions...)
	}
	slices.Sort(all)
	return all
}

// owners returns the node that owns each partition, by partition.
func (cc clusterConfig) owners() map[int32]string {
	owners := map[int32]string{}
	for _, n := range cc.Nodes {
		for _, p := range n.Partitions {
			owners[p] = n.ID
		}
	}
	return owners
}

// routes returns the router.Routes of node self: its own partitions local, every other
// owner's remote.
func (cc clusterConfig) routes(self string) *staticRoutes {
	r := &staticRoutes{topic: cc.Topic, remote: map[string][]int32{}}
	for _, n := range cc.Nodes {
		switch {
		case n.ID == self:
			r.local = slices.Clone(n.Partitions)
		case len(n.Partitions) > 0:
			r.remote[n.ID] = slices.Clone(n.Partitions)
		}
	}
	return r
}

// staticRoutes is a router.Routes that never changes: one topic, the partitions this node
// owns, and those each other node owns. A host's Routes would follow its metadata store
// instead, returning slices it never modifies afterwards.
type staticRoutes struct {
	topic  string
	local  []int32
	remote map[string][]int32
}

func (r *staticRoutes) Partitions(topic string) (local []int32, remote map[string][]int32, ok bool) {
	if topic != r.topic {
		return nil, nil, false
	}
	return r.local, r.remote, true
}

// topicConfig is the topic's config, in every node (router.Config.Topic).
func (cc clusterConfig) topicConfig(string) router.TopicConfig {
	return router.TopicConfig{VisibilityTimeout: time.Duration(cc.Visibility), MaxAckedAhead: cc.AckedAhead}
}
