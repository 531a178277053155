package router_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// benchRTT is the round trip of the network BenchmarkCrossNodeDelivery runs on. It is real
// time: routertest.Network sleeps half of it each way.
const benchRTT = time.Millisecond

// BenchmarkCrossNodeDelivery is the latency of the three delivery speeds over a
// routertest.Network with a 1 ms round trip, in round trips:
//
//	speed=0: the consumer is on the node that owns the partition: a record is produced,
//	         then consumed locally (no round trip)
//	speed=1: a gateway node that owns nothing consumes a record already on the owner: the
//	         probe brings it back (one round trip)
//	speed=2: a consumer parked on the gateway with a long wait; the record is produced once
//	         it is parked, and the owner's notification and the gateway's claim bring it
//	         (one and a half round trips)
//
// One op is one record produced, delivered and acked (the ack of speeds 1 and 2 is
// forwarded to the owner: one more round trip, inside ns/op). The delivery latency is
// timed per op with time.Now: the consume call for speeds 0 and 1, from the produce to the
// consume's return for speed 2 (the consumer's opening probe and its parking are not in it).
// A bare round trip (a Transport.Call of a one-byte frame to a member that answers at once)
// is timed after each op, with the benchmark timer stopped. Reported: rtts (the mean
// delivery latency over the mean bare round trip), latency-ns and rtt-ns (the two means),
// ns/op and allocations per op. Targets: speed=1 at most 1.3 rtts, speed=2 at most 2.5.
//
// A consumer counts as parked once its token has left for the owner, not once it landed
// there: a record produced at that instant, as speed=2's is, also waits for the rest of the
// registration's half round trip, so speed=2 comes to about two round trips, not one and a
// half.
func BenchmarkCrossNodeDelivery(b *testing.B) {
	for speed := range 3 {
		b.Run(fmt.Sprintf("speed=%d", speed), func(b *testing.B) {
			benchCrossNode(b, speed)
		})
	}
}

// benchCluster is an owner "b" of partition 0 of "orders", a gateway "g" that owns nothing
// of it, and "echo", a member that answers every frame at once, on one routertest.Network.
type benchCluster struct {
	net       *routertest.Network
	log       *routertest.MemLog
	owner     *router.Node
	gateway   *router.Node
	transport router.Transport // "g"'s side, for the bare round trips to "echo"
}

func newBenchCluster(b *testing.B, rtt time.Duration) *benchCluster {
	b.Helper()
	c := &benchCluster{net: &routertest.Network{RTT: rtt}}
	logs := &routertest.MemLogs{}
	c.log = logs.Log("orders", 0)
	topic := func(string) router.TopicConfig { return router.TopicConfig{VisibilityTimeout: vt} }
	start := func(id string, routes *routertest.Routes) *router.Node {
		node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state-" + id, FS: crashfs.New(),
			Transport: c.net.Transport(id), Topic: topic})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { node.Close() })
		c.net.Join(id, node.Serve)
		return node
	}
	ownerRoutes, gatewayRoutes := &routertest.Routes{}, &routertest.Routes{}
	ownerRoutes.Set("orders", 0)
	gatewayRoutes.SetRemote("orders", "b", 0)
	c.owner = start("b", ownerRoutes)
	c.gateway = start("g", gatewayRoutes)
	c.net.Join("echo", func(context.Context, string, []byte) ([]byte, error) { return []byte{0, 0}, nil })
	c.transport = c.net.Transport("g")
	return c
}

// produce appends one record to partition 0 and tells its owner.
func (c *benchCluster) produce() {
	off := c.log.Append(nil, []byte("v"), time.Time{})
	c.owner.Appended("orders", 0, off+1)
}

// bareRTT times one round trip to "echo".
func (c *benchCluster) bareRTT(b *testing.B) time.Duration {
	start := time.Now()
	if _, err := c.transport.Call(context.Background(), "echo", []byte{1}); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

type delivered struct {
	msgs []router.Message
	err  error
	at   time.Time // when the consume returned
}

func benchCrossNode(b *testing.B, speed int) {
	c := newBenchCluster(b, benchRTT)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// speed=2: one consumer on the gateway, which consumes (with a long wait) each time it
	// is told to, so nothing else runs while the ack and the bare round trip are timed.
	next := make(chan struct{})
	got := make(chan delivered)
	stopped := make(chan struct{})
	if speed == 2 {
		go func() {
			defer close(stopped)
			for {
				select {
				case <-ctx.Done():
					return
				case <-next:
				}
				msgs, err := c.gateway.Consume(ctx, "orders", router.ConsumeOptions{Wait: 10 * time.Minute})
				got <- delivered{msgs, err, time.Now()}
			}
		}()
	} else {
		close(stopped)
	}

	var latency, bare time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var msgs []router.Message
		var err error
		consumer := c.gateway
		switch speed {
		case 0:
			consumer = c.owner
			c.produce()
			start := time.Now()
			msgs, err = c.owner.Consume(ctx, "orders", router.ConsumeOptions{})
			latency += time.Since(start)
		case 1:
			c.produce()
			start := time.Now()
			msgs, err = c.gateway.Consume(ctx, "orders", router.ConsumeOptions{})
			latency += time.Since(start)
		case 2:
			next <- struct{}{}
			for c.gateway.Parked("orders") != 1 {
				runtime.Gosched() // the opening probe found nothing: let the consumer park
			}
			start := time.Now()
			c.produce()
			d := <-got
			msgs, err = d.msgs, d.err
			latency += d.at.Sub(start)
		}
		if err != nil || len(msgs) != 1 {
			b.Fatalf("speed %d: %d records, %v", speed, len(msgs), err)
		}
		if err := consumer.Ack(ctx, "orders", msgs[0].Receipt); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		bare += c.bareRTT(b)
		b.StartTimer()
	}
	b.StopTimer()
	cancel()
	<-stopped
	n := float64(b.N)
	b.ReportMetric(float64(latency.Nanoseconds())/n, "latency-ns")
	b.ReportMetric(float64(bare.Nanoseconds())/n, "rtt-ns")
	b.ReportMetric(float64(latency)/float64(bare), "rtts")
}

// TestIdleGatewayCostsOnlyReRegistrations: consumers parked on a gateway against 4 owners
// (one empty partition each) cost the network the keeper's re-registrations alone: one
// Register frame per owner per router.GatewayResend, whatever the number of consumers
// parked. Over a minute of fake time, 1,000 parked consumers make exactly as many calls as
// one does, all of them registrations, at most 4 × (60 s / GatewayResend) + 4.
func TestIdleGatewayCostsOnlyReRegistrations(t *testing.T) {
	const owners = 4
	window := time.Minute
	bound := int64(owners*int(window/router.GatewayResend) + owners)
	counts := map[int]int64{}
	for _, consumers := range []int{1, 1000} {
		t.Run(fmt.Sprint("consumers=", consumers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				calls, registers := idleGatewayMinute(t, owners, consumers, window)
				t.Logf("%d consumers parked on a gateway, %d owners: %d calls in %v (%.2f rpcs/s), %d of them registrations",
					consumers, owners, calls, window, float64(calls)/window.Seconds(), registers)
				assert.Equal(t, calls, registers, "nothing but registrations")
				assert.LessOrEqual(t, calls, bound)
				assert.Positive(t, calls, "the keeper re-registers while consumers are parked")
				counts[consumers] = calls
			})
		})
	}
	assert.Equal(t, counts[1], counts[1000], "the idle cost does not grow with the consumers parked")
}

// idleGatewayMinute parks consumers on a gateway against owners owners of one empty
// partition each, lets window pass once they are parked, and returns the calls made on the
// network meanwhile and how many of them were Register frames. Call it in a bubble.
func idleGatewayMinute(t *testing.T, owners, consumers int, window time.Duration) (calls, registers int64) {
	owned := map[string][]int32{"g": nil}
	for p := range owners {
		owned[fmt.Sprint("o", p)] = []int32{int32(p)}
	}
	var seen frames
	c := newCluster(t, rtt, owned, func(id string, cfg *router.Config) {
		cfg.Transport = observedTransport{cfg.Transport, &seen}
	})
	defer c.close()
	g := c.nodes["g"]
	ctx, cancel := context.WithCancel(context.Background())
	done := make([]<-chan []router.Message, consumers)
	for i := range done {
		done[i] = g.async(ctx, router.ConsumeOptions{Wait: 10 * time.Minute})
	}
	time.Sleep(time.Second) // each probes the owners, then parks
	synctest.Wait()
	require.Equal(t, consumers, g.node.Parked("orders"))

	before, registered := c.net.Calls(), seen.of(opRegisterFrame)
	time.Sleep(window)
	synctest.Wait()
	calls, registers = c.net.Calls()-before, int64(seen.of(opRegisterFrame)-registered)

	cancel()
	for _, ch := range done {
		assert.Empty(t, <-ch)
	}
	return calls, registers
}

// observedTransport shows every frame a node sends to frames before sending it.
type observedTransport struct {
	router.Transport
	seen *frames
}

func (o observedTransport) Call(ctx context.Context, to string, frame []byte) ([]byte, error) {
	o.seen.observe("", to, frame)
	return o.Transport.Call(ctx, to, frame)
}
