package offsets_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"narad.dev/consume/offsets"
)

// shardState stands in for the in-flight shard the router adapts: the committer pulls each
// acked partition's state from it at tick time.
type shardState struct {
	frontier int64
	ahead    []int64 // acked above the frontier, one by one
}

func (s *shardState) State(topic string, partition int32, into *offsets.State) bool {
	into.Frontier = s.frontier
	into.Ahead = offsets.AppendRuns(into.Ahead[:0], s.ahead)
	return true
}

// The committer persists a partition's frontier and acked-ahead offsets; Load reads them
// back the way recovery does.
func Example() {
	root, _ := os.MkdirTemp("", "offsets-example")
	defer os.RemoveAll(root)
	dir := func(topic string, p int32) string { return filepath.Join(root, topic, strconv.Itoa(int(p))) }
	os.MkdirAll(dir("orders", 0), 0o755) // the host creates partition directories

	shard := &shardState{frontier: 41, ahead: []int64{43, 44, 46}}
	c, err := offsets.New(offsets.Config{Dir: dir, Source: shard})
	if err != nil {
		panic(err)
	}
	c.MarkDirty("orders", 0) // after an ack, once the shard's lock is released
	now := time.Unix(1_700_000_000, 0)
	if err := c.Tick(now); err != nil { // Run calls Tick every 100 ms
		panic(err)
	}
	if err := c.Close(); err != nil { // writes out and levels everything
		panic(err)
	}

	again, _ := offsets.New(offsets.Config{Dir: dir, Source: shard})
	defer again.Close()
	st, _ := again.Load("orders", 0)
	fmt.Println(st.Found, st.Frontier, st.Ahead)
	// Output: true 41 [{43 44} {46 46}]
}
