package offsets_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/offsets"
)

// Checklist item 76, invariant I4: the acks a restart delivers again are the documented ones.
// Acks arrive every tick, out of order too; the machine stops between two ticks; every acked
// offset recovery does not hold must have been acked less than one tick ago after a process
// crash, and less than D + T ago after a power loss.
func TestRedeliveryWindow(t *testing.T) {
	tests := []struct {
		name    string
		process bool
		bound   time.Duration
	}{
		{"process crash: about a tick", true, 100 * time.Millisecond},
		{"power loss: about D + T", false, time.Second + 100*time.Millisecond},
	}
	const parts = 6
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for seed := range uint64(20) {
				rng := rand.New(rand.NewPCG(seed, 7))
				h := newMemHarness(t, crashfs.New(), nil)
				ackedAt := map[int32]map[int64]time.Time{}
				for p := range int32(parts) {
					h.mkdir("t", p)
					h.create("t", p)
					ackedAt[p] = map[int64]time.Time{}
				}
				h.ticks(1)
				stopAfter := 15 + rng.IntN(30)
				for i := range stopAfter + 1 {
					for p := range int32(parts) {
						f := h.shards.Snapshot("t", p).Frontier
						for range rng.IntN(5) {
							o := f + 1 + int64(rng.IntN(4))
							if h.shards.Ack("t", p, o) {
								h.c.MarkDirty("t", p)
								ackedAt[p][o] = h.now.Add(time.Duration(1+rng.IntN(99)) * time.Millisecond)
							}
						}
					}
					if i < stopAfter { // the last round of acks meets the crash, not a tick
						h.ticks(1)
					}
				}
				crashAt := h.now.Add(100 * time.Millisecond)
				var after *crashfs.FS
				if tt.process {
					after = h.fs.ProcessCrash()
				} else {
					after = h.fs.PowerCut(crashfs.PowerCut{})
				}
				h.closeCommitter()
				for p := range int32(parts) {
					st := recoverOn(t, after, "t", p)
					held := map[int64]bool{}
					for _, o := range offsets.OffsetsOf(st.Ahead) {
						held[o] = true
					}
					for o, at := range ackedAt[p] {
						if o <= st.Frontier || held[o] {
							continue
						}
						require.Less(t, crashAt.Sub(at), tt.bound,
							"seed %d partition %d: offset %d acked %v before the crash is delivered again",
							seed, p, o, crashAt.Sub(at))
					}
				}
			}
		})
	}
}
