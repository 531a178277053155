package launch

import (
	"errors"
	"fmt"
	"time"
)

// A Node is what every example's config file says of each node: its ID, the address its one
// HTTP server listens on (peers at /node, clients at /queue), and its own directory. An
// example's node config embeds it.
type Node struct {
	ID   string `json:"id"`
	Addr string `json:"addr"`
	Dir  string `json:"dir"`
}

func (n Node) node() Node { return n }

// URL is the node's base URL, which its clients call.
func (n Node) URL() string { return "http://" + n.Addr }

// PeerURL is where the node's nodehttp.Handler is mounted: what its peers' Transports call.
func (n Node) PeerURL() string { return n.URL() + "/node" }

// NodeOf returns the node of nodes named id: one of a config's nodes, each of which embeds a
// Node.
func NodeOf[N interface{ node() Node }](nodes []N, id string) (N, error) {
	for _, n := range nodes {
		if n.node().ID == id {
			return n, nil
		}
	}
	var none N
	return none, fmt.Errorf("no node %q", id)
}

// A Duration is a time.Duration in a config file, written as Go writes it ("2s"). One that is
// not positive is refused when read.
type Duration time.Duration

// MarshalText writes d as Go writes a duration.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads a positive duration.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err == nil && v <= 0 {
		err = errors.New("not positive")
	}
	if err != nil {
		return fmt.Errorf("duration %q: %w", b, err)
	}
	*d = Duration(v)
	return nil
}
