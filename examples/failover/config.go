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
// listen (HTTP, etcd's client and peer ports), where the shared log is, the topic's
// settings, and the first assignment of its partitions. Only the first assignment: from
// then on etcd holds who owns what, and the controller changes it.
type clusterConfig struct {
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
	// Visibility and CommitInterval are Go durations ("2s", "200ms").
	Visibility     launch.Duration `json:"visibility"`
	CommitInterval launch.Duration `json:"commit_interval"`
	AckedAhead     int             `json:"acked_ahead"`
	// LogDir is the shared log: a directory every node reaches (see logs.go).
	LogDir string       `json:"log_dir"`
	Nodes  []nodeConfig `json:"nodes"`
}

// A nodeConfig is one node: its HTTP address, its etcd member, its own directory (the
// node's lock and the member's data), and the partitions it owns at first.
type nodeConfig struct {
	launch.Node
	Member  member  `json:"etcd"`
	Initial []int32 `json:"initial_partitions"`
}

// newClusterConfig lays out three nodes in dir, each with partitions/3 of the topic at
// first, on ports free on 127.0.0.1 now.
func newClusterConfig(dir string, partitions int, visibility, commitInterval time.Duration) (clusterConfig, error) {
	const nodes = 3
	addrs, err := launch.FreeAddrs(3 * nodes)
	if err != nil {
		return clusterConfig{}, err
	}
	cc := clusterConfig{
		Topic: topic, Partitions: partitions, Visibility: launch.Duration(visibility),
		CommitInterval: launch.Duration(commitInterval), LogDir: filepath.Join(dir, "shared-log"),
	}
	for i := range nodes {
		id := fmt.Sprintf("node-%d", i+1)
		n := nodeConfig{Node: launch.Node{ID: id, Addr: addrs[3*i], Dir: filepath.Join(dir, id)}, Member: member{
			Name: id, ClientURL: "http://" + addrs[3*i+1], PeerURL: "http://" + addrs[3*i+2], Dir: memberDir(dir, id),
		}}
		for p := range int32(partitions) {
			if int(p)%nodes == i {
				n.Initial = append(n.Initial, p)
			}
		}
		cc.Nodes = append(cc.Nodes, n)
	}
	return cc, nil
}

// readConfig reads the config file at path, and the node id of it.
func readConfig(path, id string) (cc clusterConfig, self nodeConfig, err error) {
	if err := launch.ReadJSON(path, &cc); err != nil {
		return cc, self, err
	}
	if cc.Topic == "" || len(cc.Nodes) == 0 || cc.Partitions < 1 || cc.LogDir == "" {
		return cc, self, fmt.Errorf("%s: no topic, nodes, partitions or log directory", path)
	}
	self, err = launch.NodeOf(cc.Nodes, id)
	return cc, self, err
}

// members returns every node's etcd member.
func (cc clusterConfig) members() []member {
	ms := make([]member, len(cc.Nodes))
	for i, n := range cc.Nodes {
		ms[i] = n.Member
	}
	return ms
}

// endpoints returns every member's client URL.
func (cc clusterConfig) endpoints() []string {
	var eps []string
	for _, n := range cc.Nodes {
		eps = append(eps, n.Member.ClientURL)
	}
	return eps
}

// initialOwner returns the node that owns partition p at first.
func (cc clusterConfig) initialOwner(p int32) string {
	for _, n := range cc.Nodes {
		if slices.Contains(n.Initial, p) {
			return n.ID
		}
	}
	return ""
}

// partitions returns every partition of the topic, ascending.
func (cc clusterConfig) partitions() []int32 {
	ps := make([]int32, cc.Partitions)
	for i := range ps {
		ps[i] = int32(i)
	}
	return ps
}

// topicConfig is the topic's config, in every node (router.Config.Topic).
func (cc clusterConfig) topicConfig(string) router.TopicConfig {
	return router.TopicConfig{VisibilityTimeout: time.Duration(cc.Visibility), MaxAckedAhead: cc.AckedAhead}
}
