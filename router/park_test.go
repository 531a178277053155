package router_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
)

// parkRun is what one consume on a gateway in front of owners empty owners costs: how long
// it took to park (its tokens sent), how long a record produced at one owner after that took
// to reach it, the frames the cluster carried for that record, and the frames an idle minute
// of parked consumers costs.
type parkRun struct {
	park, deliver   time.Duration
	frames, idle    int64
	probes, tokens  uint64
	ownersContacted int
}

// measurePark runs the scenario at round trip rtt: in a synctest bubble, where settle is
// synctest.Wait and the idle minute is measured, or on the real clock (settle nil), where
// it is not.
func measurePark(t testing.TB, owners int, rtt time.Duration, settle func()) parkRun {
	owned := map[string][]int32{"gw": nil}
	for i := range owners {
		owned[fmt.Sprintf("o%02d", i)] = []int32{int32(i)}
	}
	c := newCluster(t, rtt, owned, nil)
	defer c.close()
	var frames atomic.Int64
	c.net.Observe = func(string, string, []byte) { frames.Add(1) }
	gw := c.nodes["gw"].node
	ctx := context.Background()

	var run parkRun
	got := make(chan []router.Message, 1)
	start := time.Now()
	go func() {
		msgs, err := gw.Consume(ctx, "orders", router.ConsumeOptions{Wait: time.Minute})
		assert.NoError(t, err)
		got <- msgs
	}()
	for gw.Stats().Remote.Registrations == 0 {
		time.Sleep(rtt / 10)
	}
	run.park = time.Since(start)
	time.Sleep(time.Second) // the tokens are with every owner
	if settle != nil {
		settle()
	}
	st := gw.Stats().Remote
	run.probes, run.tokens = st.Probes, st.Registrations

	before := frames.Load()
	produced := time.Now()
	c.produce(int32(owners/2), 1)
	msgs := <-got
	require.Len(t, msgs, 1)
	run.deliver = time.Since(produced)
	run.frames = frames.Load() - before
	if settle == nil {
		return run
	}

	// An idle minute with a consumer parked: what keeping the tokens costs.
	go func() {
		_, err := gw.Consume(ctx, "orders", router.ConsumeOptions{Wait: 2 * time.Minute})
		assert.NoError(t, err)
		got <- nil
	}()
	time.Sleep(10 * time.Second) // parked, its first tokens sent
	settle()
	idleFrom := frames.Load()
	time.Sleep(time.Minute)
	settle()
	run.idle = frames.Load() - idleFrom
	c.produce(int32(owners/2), 1) // let the second consume end
	<-got
	return run
}

// Issue 25 item 4: whatever the number of owners, a consume on a gateway parks within two
// round trips, and a record produced later reaches it within two; the frames per delivered
// record and the frames an idle parked consumer costs do not grow with the owners. Before,
// a consume probed every owner one after another (31 round trips at 32 owners), and the
// keeper re-registered with every owner every 2 s (31 frames a second at 32 owners).
func TestParkRoundTrips(t *testing.T) {
	const rtt = 10 * time.Millisecond
	var idleAt8 int64
	for _, owners := range []int{2, 8, 32, 64} {
		t.Run(fmt.Sprintf("owners=%d", owners), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				run := measurePark(t, owners, rtt, synctest.Wait)
				t.Logf("park %.1f rtts, deliver %.1f rtts, %d frames for the record, %d probes, %d idle frames a minute",
					float64(run.park)/float64(rtt), float64(run.deliver)/float64(rtt), run.frames, run.probes, run.idle)
				assert.LessOrEqual(t, run.park, 2*rtt+rtt/2, "parked within two round trips")
				assert.LessOrEqual(t, run.deliver, 2*rtt+rtt/2, "a later record within two round trips")
				assert.LessOrEqual(t, run.frames, int64(3), "a notification and a claim (and its reply's ack, if any)")
				assert.LessOrEqual(t, run.probes, uint64(2), "two owners probed before parking")
				if owners == 8 {
					idleAt8 = run.idle
				}
				if owners > 8 && idleAt8 > 0 {
					assert.LessOrEqual(t, run.idle, idleAt8*3/2, "idle frames do not grow with the owners")
				}
			})
		})
	}
}

// BenchmarkParkRoundTrips is TestParkRoundTrips on the real clock over routertest.Network at
// a 10 ms round trip: each op is one consume on a gateway in front of owners=N empty owners
// that parks, then takes a record produced at one of them. It reports the round trips to
// park and to deliver, and the frames the record cost. Target: at most 2 and 2, whatever N.
func BenchmarkParkRoundTrips(b *testing.B) {
	const rtt = 10 * time.Millisecond
	for _, owners := range []int{2, 8, 32, 64} {
		b.Run(fmt.Sprintf("owners=%d", owners), func(b *testing.B) {
			var park, deliver time.Duration
			var frames int64
			for b.Loop() {
				run := measurePark(b, owners, rtt, nil)
				park += run.park
				deliver += run.deliver
				frames += run.frames
			}
			b.ReportMetric(float64(park)/float64(b.N)/float64(rtt), "park-rtts")
			b.ReportMetric(float64(deliver)/float64(b.N)/float64(rtt), "deliver-rtts")
			b.ReportMetric(float64(frames)/float64(b.N), "frames/rec")
		})
	}
}
