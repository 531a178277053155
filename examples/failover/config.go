package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"narad.dev/consume/examples/internal/launch"
)

// configName is the cluster's config file, in the run's directory.
const configName = "cluster.json"

// A clusterConfig is the one file every node reads at start: who the nodes are, where they
// listen (HTTP, etcd's client and peer ports), where the shared log is, the topic's
// settings, and the first assignment of its partitions. Only the first assignment: from
// then on etcd holds who owns what, and the controller changes it.
type clusterConfig struct {
	Topic      string `json:"topic"`
	Partitions int    `json:"partitions"`
	// Visibility and CommitInterval are Go durations ("2s", "200ms").
	Visibility     string `json:"visibility"`
	CommitInterval string `json:"commit_interval"`
	AckedAhead     int    `json:"acked_ahead"`
	// LogDir is the shared log: a directory every node reaches (see logs.go).
	LogDir string       `json:"log_dir"`
	Nodes  []nodeConfig `json:"nodes"`
}

// A nodeConfig is one node: its HTTP address, its etcd member, its own directory (the
// node's lock and the member's data), and the partitions it owns at first.
type nodeConfig struct {
	ID      string  `json:"id"`
	Addr    string  `json:"addr"`
	Dir     string  `json:"dir"`
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
		Topic: topic, Partitions: partitions, Visibility: visibility.String(),
		CommitInterval: commitInterval.String(), LogDir: filepath.Join(dir, "shared-log"),
	}
	for i := range nodes {
		id := fmt.Sprintf("node-%d", i+1)
		n := nodeConfig{ID: id, Addr: addrs[3*i], Dir: filepath.Join(dir, id), Member: member{
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

func (cc clusterConfig) write(path string) error { return launch.WriteJSON(path, cc) }

func readConfig(path string) (clusterConfig, error) {
	var cc clusterConfig
	if err := launch.ReadJSON(path, &cc); err != nil {
		return cc, err
	}
	if cc.Topic == "" || len(cc.Nodes) == 0 || cc.Partitions < 1 || cc.LogDir == "" {
		return cc, fmt.Errorf("%s: no topic, nodes, partitions or log directory", path)
	}
	if _, err := cc.visibility(); err != nil {
		return cc, fmt.Errorf("%s: visibility: %w", path, err)
	}
	if _, err := cc.commitInterval(); err != nil {
		return cc, fmt.Errorf("%s: commit_interval: %w", path, err)
	}
	return cc, nil
}

func positiveDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err == nil && d <= 0 {
		err = errors.New("not positive")
	}
	return d, err
}

func (cc clusterConfig) visibility() (time.Duration, error) { return positiveDuration(cc.Visibility) }

func (cc clusterConfig) commitInterval() (time.Duration, error) {
	return positiveDuration(cc.CommitInterval)
}

// node returns the node named id.
func (cc clusterConfig) node(id string) (nodeConfig, bool) {
	i := slices.IndexFunc(cc.Nodes, func(n nodeConfig) bool { return n.ID == id })
	if i < 0 {
		return nodeConfig{}, false
	}
	return cc.Nodes[i], true
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

// peerURL is where a node's nodehttp.Handler is mounted: what its peers' Transports call.
func peerURL(addr string) string { return "http://" + addr + "/node" }
