package launch

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

type testNode struct {
	Node
	Partitions []int32 `json:"partitions"`
}

func TestNodeOf(t *testing.T) {
	nodes := []testNode{{Node: Node{ID: "node-1", Addr: "127.0.0.1:1"}}, {Node: Node{ID: "node-2", Addr: "127.0.0.1:2"}, Partitions: []int32{3}}}
	n, err := NodeOf(nodes, "node-2")
	require.NoError(t, err)
	require.Equal(t, []int32{3}, n.Partitions)
	require.Equal(t, "http://127.0.0.1:2/node", n.PeerURL())
	_, err = NodeOf(nodes, "node-3")
	require.EqualError(t, err, `no node "node-3"`)

	b, err := json.Marshal(nodes[1])
	require.NoError(t, err)
	require.JSONEq(t, `{"id":"node-2","addr":"127.0.0.1:2","dir":"","partitions":[3]}`, string(b), "the embedded fields, flat")
}

func TestDuration(t *testing.T) {
	var v struct {
		D Duration `json:"d"`
	}
	require.NoError(t, json.Unmarshal([]byte(`{"d":"250ms"}`), &v))
	require.Equal(t, 250*time.Millisecond, time.Duration(v.D))
	b, err := json.Marshal(v)
	require.NoError(t, err)
	require.JSONEq(t, `{"d":"250ms"}`, string(b))
	for _, bad := range []string{`{"d":"0s"}`, `{"d":"-1s"}`, `{"d":"x"}`, `{"d":2}`} {
		require.Error(t, json.Unmarshal([]byte(bad), &v), bad)
	}
}
