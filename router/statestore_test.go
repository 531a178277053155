package router_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// faultyStore is a state store that misbehaves as real ones do: it fails, answers slowly,
// and answers stale, damaged or another partition's state.
type faultyStore struct {
	mu      sync.Mutex
	rng     *rand.Rand
	history map[string][][]byte // every state saved, per partition, oldest first
	mode    string
}

func key(topic string, p int32) string { return fmt.Sprintf("%s/%d", topic, p) }

func (s *faultyStore) Load(ctx context.Context, topic string, p int32) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.history[key(topic, p)]
	if len(h) == 0 {
		return nil, nil
	}
	b := slices.Clone(h[len(h)-1])
	switch s.mode {
	case "fail":
		if s.rng.IntN(3) == 0 {
			return nil, errors.New("store unavailable")
		}
	case "stale":
		b = slices.Clone(h[s.rng.IntN(len(h))])
	case "damaged":
		i := s.rng.IntN(len(b) * 8)
		b[i/8] ^= 1 << (i % 8)
	case "foreign":
		for k, other := range s.history {
			if k != key(topic, p) && len(other) > 0 {
				return slices.Clone(other[len(other)-1]), nil
			}
		}
	case "slow":
		d := time.Duration(s.rng.IntN(3000)) * time.Millisecond
		s.mu.Unlock()
		time.Sleep(d)
		s.mu.Lock()
	}
	return b, nil
}

func (s *faultyStore) Save(ctx context.Context, batch []router.PartitionState) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.mode {
	case "fail":
		if s.rng.IntN(3) == 0 {
			return errors.New("store unavailable")
		}
	case "slow":
		d := time.Duration(s.rng.IntN(3000)) * time.Millisecond
		s.mu.Unlock()
		time.Sleep(d)
		s.mu.Lock()
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	for _, e := range batch {
		s.history[key(e.Topic, e.Partition)] = append(s.history[key(e.Topic, e.Partition)], slices.Clone(e.State))
	}
	return nil
}

func (s *faultyStore) Delete(ctx context.Context, topic string) error { return nil }

// Whatever a store answers, no record that was not acked is skipped: across restarts on new
// machines, every record never acked is delivered again. Acked records may come back (a
// stale or damaged state, a failed save), never unacked ones go missing.
func TestStoreFaultsNeverSkipARecord(t *testing.T) {
	for _, mode := range []string{"none", "fail", "slow", "stale", "damaged", "foreign"} {
		for seed := range uint64(4) {
			t.Run(fmt.Sprintf("%s/%d", mode, seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { testStoreFaults(t, mode, seed) })
			})
		}
	}
}

func testStoreFaults(t *testing.T, mode string, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	store := &faultyStore{rng: rand.New(rand.NewPCG(seed, 8)), history: map[string][][]byte{}, mode: mode}
	logs := &routertest.MemLogs{}
	routes := &routertest.Routes{}
	routes.Set("orders", 0, 1)
	const perPartition = 30
	for p := range int32(2) {
		log := logs.Log("orders", p)
		for range perPartition {
			log.Append(nil, []byte("v"), time.Now())
		}
	}
	everAcked := map[string]bool{}
	delivered := map[string]bool{}
	ctx := context.Background()
	for round := range 5 {
		node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: fmt.Sprintf("/machine-%d", round),
			FS: crashfs.New(), Store: store, CommitInterval: 100 * time.Millisecond})
		require.NoError(t, err)
		for range 3 {
			msgs, err := node.Consume(ctx, "orders", router.ConsumeOptions{Max: 20})
			if err != nil {
				var setAside *router.SetAsideError
				require.ErrorAs(t, err, &setAside, "a store that fails its loads sets partitions aside")
				time.Sleep(time.Second)
				continue
			}
			for _, m := range msgs {
				k := key(m.Topic, m.Partition) + fmt.Sprint(":", m.Offset)
				delivered[k] = true
				if rng.IntN(3) > 0 {
					if err := node.Ack(ctx, "orders", m.Receipt); err == nil {
						everAcked[k] = true
					}
				} else {
					require.NoError(t, node.Release(ctx, "orders", m.Receipt))
				}
			}
			time.Sleep(150 * time.Millisecond)
		}
		_ = node.Close() // a failing store may fail the final save: those acks come back
	}
	// A last node with a store that behaves: everything not acked is there to be delivered.
	store.mode = "none"
	node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/machine-last", FS: crashfs.New(), Store: store})
	require.NoError(t, err)
	defer node.Close()
	remaining := map[string]bool{}
	for {
		msgs, err := node.Consume(ctx, "orders", router.ConsumeOptions{Max: 100})
		require.NoError(t, err)
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			remaining[key(m.Topic, m.Partition)+fmt.Sprint(":", m.Offset)] = true
			require.NoError(t, node.Ack(ctx, "orders", m.Receipt))
		}
	}
	for p := range int32(2) {
		for off := range int64(perPartition) {
			k := key("orders", p) + fmt.Sprint(":", off)
			if !everAcked[k] {
				assert.Truef(t, remaining[k], "%s: %s never acked, never delivered again: skipped", mode, k)
			}
		}
	}
}
