package router_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/internal/wire"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

const rtt = time.Millisecond

// Checklist 94, 110-112: the three delivery speeds. A record on a partition this node owns
// costs no round trip; one that was there when the consumer asked comes back inline with the
// probe, one round trip; one that arrives while the consumer waits costs a notification and
// a claim (one and a half round trips on a network whose notification is answered by a
// claim as soon as it lands).
func TestThreeDeliverySpeeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		defer c.close()
		ctx := context.Background()
		b, g := c.nodes["b"], c.nodes["g"]

		c.produce(0, 1)
		start := time.Now()
		require.Len(t, b.consume(ctx, router.ConsumeOptions{}), 1)
		assert.Zero(t, time.Since(start), "speed 0: local")

		c.produce(0, 1)
		start = time.Now()
		msgs := g.consume(ctx, router.ConsumeOptions{})
		require.Len(t, msgs, 1)
		assert.Equal(t, rtt, time.Since(start), "speed 1: the probe's round trip")
		require.NoError(t, g.ack(msgs[0]), "acked through the gateway, forwarded to the owner")

		got := g.async(ctx, router.ConsumeOptions{Wait: 10 * time.Second})
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, 1, g.node.Parked("orders"))
		m := c.produceTo(got, 0, 2*rtt, "speed 2: notify, then claim")
		assert.Equal(t, int64(2), m.Offset)
		st := g.node.Stats().Remote
		assert.Equal(t, uint64(1), st.Notifications)
		assert.Equal(t, uint64(1), st.ClaimHits)
	})
}

// Checklist 96, 97: one token, one record, one peer told. Two gateways park on the same
// owner; one record wakes exactly one of them, and the other waits on for the next.
func TestOneRecordOnePeerTold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g1": nil, "g2": nil}, nil)
		defer c.close()
		ctx := context.Background()
		first := c.nodes["g1"].async(ctx, router.ConsumeOptions{Wait: 30 * time.Second})
		second := c.nodes["g2"].async(ctx, router.ConsumeOptions{Wait: 30 * time.Second})
		time.Sleep(100 * time.Millisecond)
		c.produce(0, 1)
		time.Sleep(5 * time.Second) // keepers re-register meanwhile: still nobody else told
		synctest.Wait()
		assert.Equal(t, uint64(1), c.nodes["b"].node.Stats().Remote.Notified, "one notification for one record")
		var got []router.Message
		select {
		case got = <-first:
		case got = <-second:
		default:
			t.Fatal("nobody got the record")
		}
		require.Len(t, got, 1)
		assert.Equal(t, 1, c.nodes["g1"].node.Parked("orders")+c.nodes["g2"].node.Parked("orders"), "the other waits on")
		c.produce(0, 1)
		var again []router.Message
		select {
		case again = <-first:
		case again = <-second:
		}
		require.Len(t, again, 1)
		assert.Equal(t, int64(1), again[0].Offset)
	})
}

// Checklist 99, 100: a claim carrying the Claim flag retires the owner's hold at once, so
// a sparse stream reaches a consumer parked on another node one notification and claim
// after each record, not a hold's deadline later (the bug: a hold kept until its deadline
// counted against the next record, and each record of a sparse stream came about a second
// late).
func TestSparseStreamIsNotHeldBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		defer c.close()
		g := c.nodes["g"]
		ctx := context.Background()
		for i := range 5 {
			got := g.async(ctx, router.ConsumeOptions{Wait: 10 * time.Second})
			time.Sleep(300 * time.Millisecond)
			m := c.produceTo(got, 0, 2*rtt, "record %d held back", i)
			assert.Equal(t, int64(i), m.Offset)
			require.NoError(t, g.ack(m))
		}
		assert.Zero(t, c.nodes["b"].node.Stats().Remote.Passed)
	})
}

// Checklist 97, 100: a claim that comes back empty (the owner's own consumer took the
// record between the notification and the claim) puts the gateway's token back at once, so
// the next record reaches the consumer still parked there a notification and a claim after
// it arrives, not at the keeper's next pass (up to tokens.KeepInterval later).
func TestEmptyClaimPutsTheTokenBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		defer c.close()
		g, b := c.nodes["g"], c.nodes["b"]
		ctx := context.Background()
		got := g.async(ctx, router.ConsumeOptions{Wait: 10 * time.Second})
		time.Sleep(300 * time.Millisecond) // the keeper's passes come at 100 ms + k * 500 ms
		c.produce(0, 1)                    // b notifies g...
		mine := b.consume(ctx, router.ConsumeOptions{})
		require.Len(t, mine, 1, "...and its own consumer takes the record first")
		time.Sleep(10 * rtt)
		synctest.Wait()
		require.Equal(t, uint64(1), g.node.Stats().Remote.Claims)
		require.Zero(t, g.node.Stats().Remote.ClaimHits, "the claim came back empty")
		require.Equal(t, 1, g.node.Parked("orders"), "the consumer waits on")
		m := c.produceTo(got, 0, 4*rtt, "the next record, with the token put back at once")
		assert.Equal(t, int64(1), m.Offset)
	})
}

// Checklist 98, 103: a notification that reaches a node with nobody parked is passed at
// once, and the owner offers the record to its next token a round trip later, not after
// the hold's deadline.
func TestPassGoesToTheNextToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g1": nil, "g2": nil}, nil)
		defer c.close()
		ctx := context.Background()
		leaving, leave := context.WithCancel(ctx)
		gone := c.nodes["g1"].async(leaving, router.ConsumeOptions{Wait: 30 * time.Second})
		time.Sleep(50 * time.Millisecond)
		stays := c.nodes["g2"].async(ctx, router.ConsumeOptions{Wait: 30 * time.Second})
		time.Sleep(50 * time.Millisecond)
		leave() // g1's token stays with the owner: tokens lapse, nothing retires them
		<-gone
		synctest.Wait()
		c.produceTo(stays, 0, 3*rtt, "a pass, then the next token's notify and claim")
		assert.Equal(t, uint64(1), c.nodes["g1"].node.Stats().Remote.Passes)
	})
}

// Checklist 100, 104: a pass answering a notification ends the hold that notification made,
// and no other. A notification the network delivers twice draws two answers: a claim, from
// the copy that spent the requester's token, and a pass, from the other, which found none.
// The claim retires the requester's oldest hold; the pass, arriving after it, used to retire
// the requester's oldest hold again, by then a later one whose notification was still on
// its way, and the owner promised its record once more: two notifications out for one record
// (the cluster simulation, seed 70578, where the requester was told three times over).
func TestPassEndsItsOwnHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}}, nil)
		defer c.close()
		// g is a requester scripted by hand: each notification it gets waits for the status
		// the test answers it with.
		notified := make(chan chan byte, 4)
		c.net.Join("g", func(ctx context.Context, _ string, frame []byte) ([]byte, error) {
			answer := make(chan byte)
			notified <- answer
			select {
			case status := <-answer:
				return wire.EncodeReply([]wire.Answer{{Status: status}}), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
		ctx := context.Background()
		g := c.net.Transport("g")
		call := func(req wire.Request) []byte {
			frame, err := wire.EncodeRequest(req)
			require.NoError(t, err)
			reply, err := g.Call(ctx, "b", frame)
			require.NoError(t, err)
			return reply
		}
		register := func() {
			call(wire.Request{Op: wire.OpRegister, Registrations: []wire.Registration{{Topic: "orders", TTL: time.Minute}}})
		}
		c.produce(0, 2)
		register()
		first := <-notified // b holds one of the two records for g
		claim := call(wire.Request{Op: wire.OpConsume, Topic: "orders", Consume: wire.Consume{RequestID: 1, Pinned: -1, Claim: true}})
		r, err := wire.DecodeConsumeReply(claim)
		require.NoError(t, err)
		require.Len(t, r.Deliveries, 1, "the claim, which retired the hold")
		register()
		second := <-notified // the other record, held for g
		first <- wire.StatusPass
		synctest.Wait()
		register()
		synctest.Wait()
		assert.Equal(t, uint64(2), c.nodes["b"].node.Stats().Remote.Notified,
			"one record left, and g's notification for it unanswered: nothing more to promise")
		second <- wire.StatusOK
	})
}

// Checklist 109, 132: a gateway parks its consumers on tokens; an owner that restarts
// forgets them, and the gateway's keeper registers again, which wakes the owner: its
// backlog reaches the parked consumer with no scan and no probe.
func TestGatewaySurvivesAnOwnerRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		defer c.close()
		ctx := context.Background()
		got := c.nodes["g"].async(ctx, router.ConsumeOptions{Wait: time.Minute})
		time.Sleep(100 * time.Millisecond)
		b := c.nodes["b"]
		require.NoError(t, b.node.Close())
		log := c.logs.Log("orders", 0)
		log.Append(nil, []byte("backlog"), time.Now()) // written while the owner was down: no Appended
		b.start()
		restarted := time.Now()
		msgs := <-got
		require.Len(t, msgs, 1)
		assert.Equal(t, "backlog", string(msgs[0].Value))
		assert.LessOrEqual(t, time.Since(restarted), router.GatewayResend+2*rtt, "within one gateway re-registration")
	})
}

// Checklist 113, 114: a long-poll on a topic no node serves yet is held, not answered at
// once; once an owner appears it probes and parks for what is left of its wait.
func TestUnassignedTopicWaitsForAnOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": nil, "g": nil}, nil)
		defer c.close()
		ctx := context.Background()
		start := time.Now()
		got := c.nodes["g"].async(ctx, router.ConsumeOptions{Wait: 10 * time.Second})
		time.Sleep(time.Second)
		synctest.Wait()
		select {
		case <-got:
			t.Fatal("answered before the wait ended")
		default:
		}
		c.assign("b", 0)
		time.Sleep(time.Second)
		c.produce(0, 1)
		msgs := <-got
		require.Len(t, msgs, 1, "the record, not an empty answer once the owner appeared")
		assert.Less(t, time.Since(start), 3*time.Second)

		// Every owner down: held for the wait, and an ack answers 503 with no RPC.
		c.down.Store("b", true)
		start = time.Now()
		assert.Empty(t, c.nodes["g"].consume(ctx, router.ConsumeOptions{Wait: 2 * time.Second}))
		assert.Equal(t, 2*time.Second, time.Since(start), "held for the wait")
		calls := c.net.CallsTo("b")
		err := c.nodes["g"].ack(msgs[0])
		require.ErrorIs(t, err, router.ErrUnavailable)
		assert.Equal(t, 503, router.HTTPStatus(err))
		errs := c.nodes["g"].node.AckBatch(ctx, "orders", []router.Handle{msgs[0].Receipt})
		require.ErrorIs(t, errs[0], router.ErrUnavailable)
		assert.Equal(t, calls, c.net.CallsTo("b"), "no RPC to a node the host says is down")
	})
}

// Checklist 115: a partition that became local while a long-poll was held answers empty,
// so the next poll takes the local path with its full wait.
func TestHeldPollAnswersEmptyWhenThePartitionComesHere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": nil, "g": nil}, nil)
		defer c.close()
		start := time.Now()
		got := c.nodes["g"].async(context.Background(), router.ConsumeOptions{Wait: 10 * time.Second})
		time.Sleep(time.Second)
		c.assign("g", 0)
		assert.Empty(t, <-got)
		assert.Less(t, time.Since(start), time.Second+router.UnassignedRecheck+time.Millisecond)
	})
}

// Checklist 144-146: a batch travels to the owner as Max; the owner answers one scan
// capped at RemoteBatch records, and the requester passes it through.
func TestBatchConsumeAcrossNodes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, probesOnly(nil))
		defer c.close()
		ctx := context.Background()
		c.produce(0, 250)
		g := c.nodes["g"]
		assert.Len(t, g.consume(ctx, router.ConsumeOptions{Max: 10}), 10)
		msgs := g.consume(ctx, router.ConsumeOptions{Max: 500})
		assert.Len(t, msgs, router.RemoteBatch, "capped at the owner")
		assert.Equal(t, int64(10), msgs[0].Offset)
		errs := g.node.AckBatch(ctx, "orders", receipts(msgs))
		for _, err := range errs {
			require.NoError(t, err)
		}
	})
}

// Checklist 147, 148: pinned consumes and replays of a partition another node owns go to
// its owner.
func TestPinnedAndReplayGoToTheOwner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"a": {0}, "b": {1}}, nil)
		defer c.close()
		ctx := context.Background()
		c.produce(0, 2)
		c.produce(1, 3)
		a := c.nodes["a"]
		msgs := a.consume(ctx, router.ConsumeOptions{Pinned: true, Partition: 1, Max: 5})
		require.Len(t, msgs, 3)
		for _, m := range msgs {
			assert.Equal(t, int32(1), m.Partition)
		}
		replayed, err := a.node.Replay(ctx, "orders", 1, 0, 10)
		require.NoError(t, err)
		assert.Equal(t, []int64{0, 1, 2}, offsetsOf(replayed))
		assert.True(t, replayed[0].Expiry.IsZero())

		// A pinned long-poll on the remote partition waits for its record.
		got := a.async(ctx, router.ConsumeOptions{Pinned: true, Partition: 1, Wait: 10 * time.Second})
		time.Sleep(100 * time.Millisecond)
		c.produce(0, 1) // another partition: not for it
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		select {
		case m := <-got:
			t.Fatalf("a pinned consume answered before its partition had a record: %+v", m)
		default:
		}
		c.produce(1, 1)
		pinned := <-got
		require.Len(t, pinned, 1)
		assert.Equal(t, int32(1), pinned[0].Partition)
	})
}

func receipts(msgs []router.Message) []router.Handle {
	out := make([]router.Handle, len(msgs))
	for i, m := range msgs {
		out[i] = m.Receipt
	}
	return out
}

// atWire plays an older release on the named nodes.
func atWire(version uint8, ids ...string) func(string, *router.Config) {
	return func(id string, cfg *router.Config) {
		if slices.Contains(ids, id) {
			cfg.WireVersion = version
		}
	}
}

// Checklist 152-154: an owner on a release before Max refuses a batch probe with a 400, once
// for each newer field it carries (the Compact flag, the Headers flag, the relative expiry,
// then Max); the probe goes again
// without them, for one record, and the owner is remembered for two minutes, so a rolling
// upgrade costs one refused request per newer field per old owner per two minutes.
func TestOwnerBeforeMaxCostsOneRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, probesOnly(atWire(5, "b")))
		defer c.close()
		ctx := context.Background()
		c.produce(0, 10)
		g := c.nodes["g"]
		calls := c.net.Calls()
		assert.Len(t, g.consume(ctx, router.ConsumeOptions{Max: 5}), 1, "an owner before Max answers one record")
		assert.Equal(t, int64(5), c.net.Calls()-calls, "the refused requests, then one for one record")
		calls = c.net.Calls()
		assert.Len(t, g.consume(ctx, router.ConsumeOptions{Max: 5}), 1)
		assert.Equal(t, int64(1), c.net.Calls()-calls, "remembered: no refusal")
		time.Sleep(2*time.Minute + time.Second)
		calls = c.net.Calls()
		assert.Len(t, g.consume(ctx, router.ConsumeOptions{Max: 5}), 1)
		assert.Equal(t, int64(5), c.net.Calls()-calls, "tried again after two minutes")
	})
}

// Checklist 101, 152: an owner on a release before the Claim flag refuses a claim with a
// 400; the claimant drops the flag and claims as a plain probe, which leases the record
// just the same, within the one claim budget.
func TestOwnerBeforeClaimStillDelivers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, atWire(4, "b"))
		defer c.close()
		ctx := context.Background()
		g := c.nodes["g"]
		for i := range 2 {
			got := g.async(ctx, router.ConsumeOptions{Wait: 10 * time.Second, Max: 3})
			time.Sleep(100 * time.Millisecond)
			produced := time.Now()
			c.produce(0, 1)
			msgs := <-got
			require.Len(t, msgs, 1)
			assert.Equal(t, int64(i), msgs[0].Offset)
			if i == 0 {
				assert.LessOrEqual(t, time.Since(produced), 4*rtt, "a refused claim with Max, then without, then plain")
			} else {
				// Remembered: a plain claim at once. But a plain claim never retires the
				// hold the owner kept for it, so the next record waited for that hold's
				// deadline: what an owner before the flag costs a sparse stream.
				assert.LessOrEqual(t, time.Since(produced), time.Second+2*rtt)
			}
		}
	})
}

// Checklist 109, 153: an owner on a release before tokens refuses a registration; the
// consumer polls it on a backoff instead (100 ms doubling to 1 s), and still gets a record
// that arrives while it waits. So does a consumer on a node owners cannot call back.
func TestOwnerBeforeTokensIsPolled(t *testing.T) {
	for _, tc := range []struct {
		name string
		tune func(string, *router.Config)
	}{
		{"owner before tokens", atWire(3, "b")},
		{"no callbacks", func(id string, cfg *router.Config) { cfg.NoCallbacks = id == "g" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, tc.tune)
				defer c.close()
				got := c.nodes["g"].async(context.Background(), router.ConsumeOptions{Wait: 30 * time.Second})
				time.Sleep(5 * time.Second)
				c.produceTo(got, 0, time.Second+2*rtt, "within one poll at the longest backoff")
				assert.Zero(t, c.nodes["b"].node.Stats().Remote.Tokens, "no token placed")
			})
		})
	}
}

// dropFrames makes the network drop the frames of op from one node to another, while on.
type dropFrames struct {
	mu       sync.Mutex
	from, to string
	op       byte
	what     routertest.Fault
	on       bool
}

func (d *dropFrames) set(on bool) {
	d.mu.Lock()
	d.on = on
	d.mu.Unlock()
}

func (d *dropFrames) fault(from, to string, frame []byte) routertest.Fault {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.on && from == d.from && to == d.to && len(frame) > 0 && frame[0] == d.op {
		return d.what
	}
	return routertest.Deliver
}

// Checklist 100, 102: a claim that never comes falls back to the hold's deadline, and a
// hold that ran to its deadline does not delay the next record: the record it held goes to
// the next token at once, and so does a record that lands after it.
func TestHoldWithoutClaimLapses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g1": nil, "g2": nil}, nil)
		defer c.close()
		drop := &dropFrames{from: "g1", to: "b", op: opConsumeFrame, what: routertest.DropRequest}
		c.net.Fault = drop.fault
		ctx := context.Background()
		first := c.nodes["g1"].async(ctx, router.ConsumeOptions{Wait: 30 * time.Second})
		time.Sleep(50 * time.Millisecond)
		second := c.nodes["g2"].async(ctx, router.ConsumeOptions{Wait: 30 * time.Second})
		time.Sleep(50 * time.Millisecond)
		drop.set(true) // g1's claims are lost on the way
		c.produceTo(second, 0, time.Second+2*rtt, "the hold lapsed, then the next token")
		drop.set(false)
		time.Sleep(time.Second) // g1's keeper registers again
		c.produceTo(first, 0, 2*rtt, "a lapsed hold never counts against the next record")
	})
}

// Checklist 107, 109: a notification lost on the way (or a token the owner silently
// dropped) is made good by the gateway's next registration, which wakes the owner.
func TestLostNotificationIsMadeGood(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		defer c.close()
		drop := &dropFrames{from: "b", to: "g", op: opNotifyFrame, what: routertest.DropRequest, on: true}
		c.net.Fault = drop.fault
		got := c.nodes["g"].async(context.Background(), router.ConsumeOptions{Wait: time.Minute})
		time.Sleep(100 * time.Millisecond)
		produced := time.Now()
		c.produce(0, 1)
		time.Sleep(100 * time.Millisecond)
		drop.set(false)
		msgs := <-got
		require.Len(t, msgs, 1)
		assert.LessOrEqual(t, time.Since(produced), router.GatewayResend+time.Second+3*rtt)
	})
}

// Checklist 149-151: the owner remembers the handles of every forwarded reply; a cancel
// that races the reply (the reply lost, the consumer gone) gives them all back at once
// rather than after their visibility timeout.
func TestCancelRaceGivesTheReplyBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		defer c.close()
		c.produce(0, 5)
		drop := &dropFrames{from: "g", to: "b", op: opConsumeFrame, what: routertest.DropReply, on: true}
		c.net.Fault = drop.fault
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		_, err := c.nodes["g"].node.Consume(ctx, "orders", router.ConsumeOptions{Max: 5})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		time.Sleep(10 * rtt) // the cancel reaches the owner
		drop.set(false)
		msgs := c.nodes["b"].consume(context.Background(), router.ConsumeOptions{Max: 5})
		assert.Equal(t, []int64{0, 1, 2, 3, 4}, offsetsOf(msgs), "all five visible again, well before their timeout")
		assert.Equal(t, uint64(5), c.nodes["b"].node.Stats().Remote.Cancelled)
	})
}

// Checklist 145: records an owner's batch carried that the response cannot hold are nacked
// at their owner at once, not left invisible until their visibility timeout.
func TestFitResponseNacksAnOwnersRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		defer c.close()
		c.produce(0, 4)
		g := c.nodes["g"]
		msgs := g.consume(context.Background(), router.ConsumeOptions{Max: 4})
		require.Len(t, msgs, 4)
		fit := g.node.FitResponse(msgs, func(*router.Message) int { return 10 }, 25)
		assert.Len(t, fit, 2)
		time.Sleep(10 * rtt)
		again := c.nodes["b"].consume(context.Background(), router.ConsumeOptions{Max: 4})
		assert.Equal(t, []int64{2, 3}, offsetsOf(again))
	})
}

// Checklist 106, 108: consumers parking within the share window of a registration share
// it; one parking later sends its own (the owner's reply only says the frame arrived, not
// that the token is still held).
func TestParkersShareARecentRegistration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		defer c.close()
		seen := &frames{}
		c.net.Observe = seen.observe
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		g := c.nodes["g"]
		var polls []<-chan []router.Message
		polls = append(polls, g.async(ctx, router.ConsumeOptions{Wait: time.Minute}))
		time.Sleep(100 * time.Millisecond)
		polls = append(polls, g.async(ctx, router.ConsumeOptions{Wait: time.Minute}))
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		assert.Equal(t, 1, seen.of(opRegisterFrame), "the second shares the first's registration")
		time.Sleep(300 * time.Millisecond)
		polls = append(polls, g.async(ctx, router.ConsumeOptions{Wait: time.Minute}))
		time.Sleep(10 * time.Millisecond)
		synctest.Wait()
		assert.Equal(t, 2, seen.of(opRegisterFrame), "past the window: its own")
		cancel()
		for _, p := range polls {
			<-p
		}
	})
}

// A registration whose frame was lost forgets its token when its budget ends, and not the
// token a later registration left with the owner meanwhile: the owner's notification for
// that one is taken, and the record reaches the parked consumer a notification and a claim
// after it was produced. Before, the lost frame's failure forgot the later registration,
// the notification was passed as one for no token, and the record waited for the keeper's
// next registration (up to tokens.KeepInterval; the cluster simulation's sparse stream,
// seeds 18651 and 55601 with paused owners).
func TestLostRegistrationForgetsOnlyItself(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		defer c.close()
		drop := &dropFrames{from: "g", to: "b", op: opRegisterFrame, what: routertest.DropRequest}
		c.net.Fault = drop.fault
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		g := c.nodes["g"]
		start := time.Now()
		// Each parks past the share window of the last registration, so sends its own: the
		// first's arrives (and starts the keeper's passes, every tokens.KeepInterval), the
		// second's is lost, the third's arrives.
		got := []<-chan []router.Message{g.async(ctx, router.ConsumeOptions{Wait: time.Minute})}
		time.Sleep(300 * time.Millisecond)
		drop.set(true)
		got = append(got, g.async(ctx, router.ConsumeOptions{Wait: time.Minute}))
		time.Sleep(10 * rtt)
		drop.set(false)
		time.Sleep(time.Second - time.Since(start))
		got = append(got, g.async(ctx, router.ConsumeOptions{Wait: time.Minute}))
		// The lost frame's budget ends at 2.3 s, between two passes of the keeper.
		time.Sleep(2350*time.Millisecond - time.Since(start))
		synctest.Wait()
		produced := time.Now()
		c.produce(0, 1)
		select {
		case msgs := <-got[0]:
			require.Len(t, msgs, 1)
		case msgs := <-got[1]:
			require.Len(t, msgs, 1)
		case msgs := <-got[2]:
			require.Len(t, msgs, 1)
		}
		assert.LessOrEqual(t, time.Since(produced), 2*rtt, "a notification and a claim")
		assert.Zero(t, g.node.Stats().Remote.Passes, "the notification answered a token g left")
		assert.Zero(t, g.node.Stats().Remote.Unbacked)
		cancel()
	})
}

// A restarted node never reuses the request ids of its previous life: an owner still
// remembers the replies to those for the cancel race, and a cancel of the new request would
// give back records the old one delivered (a second live holder). Found by the cluster state
// machine.
func TestRequestIDsDifferAcrossRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		defer c.close()
		var ids []uint64
		c.net.Observe = func(from, _ string, frame []byte) {
			if from != "g" {
				return
			}
			if req, err := wire.DecodeRequest(frame, wire.Newest); err == nil && req.Op == wire.OpConsume {
				ids = append(ids, req.Consume.RequestID)
			}
		}
		g := c.nodes["g"]
		g.consume(context.Background(), router.ConsumeOptions{})
		require.NoError(t, g.node.Close())
		g.start()
		g.consume(context.Background(), router.ConsumeOptions{})
		require.Len(t, ids, 2)
		assert.NotEqual(t, ids[0], ids[1])
	})
}

// An owner on a release before consumption across nodes refuses the consume op: the consume
// answers ErrUnavailable (503, not 400), and the owner is asked nothing more for two
// minutes, so a rolling upgrade costs one refused frame per old owner, not one per consume
// (found by the cluster simulation).
func TestOwnerBeforeConsumeOpIsAskedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, atWire(2, "b"))
		defer c.close()
		c.produce(0, 1)
		g := c.nodes["g"]
		_, err := g.node.Consume(context.Background(), "orders", router.ConsumeOptions{})
		require.ErrorIs(t, err, router.ErrUnavailable)
		assert.Equal(t, 503, router.HTTPStatus(err))
		calls := c.net.CallsTo("b")
		assert.Empty(t, g.consume(context.Background(), router.ConsumeOptions{Wait: 20 * time.Second}), "held, asking nothing")
		_, err = g.node.Replay(context.Background(), "orders", 0, 0, 1)
		require.ErrorIs(t, err, router.ErrUnavailable)
		assert.Equal(t, calls, c.net.CallsTo("b"), "no frame to the old owner within two minutes")
	})
}

// Checklist 97, 100: a requester that does not answer a notification is presumed gone: its
// hold ends (that hold alone: tokens.Queue.Abandon) and its token goes after notifyBudget,
// and the record goes to the next token. Before, the hold was kept to its deadline, so each
// stale token held a sparse record for a second (50 of them, 50 s).
func TestUnansweredNotificationMovesOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g1": nil, "g2": nil}, nil)
		hole := &blackhole{node: "g1"}
		c.net.Fault = hole.fault
		defer c.close()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		c.nodes["g1"].async(ctx, router.ConsumeOptions{Wait: time.Minute})
		time.Sleep(10 * rtt) // g1's token is first at b
		synctest.Wait()
		got := c.nodes["g2"].async(ctx, router.ConsumeOptions{Wait: time.Minute})
		time.Sleep(10 * rtt)
		synctest.Wait()
		hole.on.Store(true) // g1 hangs: b's notifications to it go unanswered
		c.produceTo(got, 0, 250*time.Millisecond+2*rtt, "the unanswered hold moved on at the notification's budget, not the hold's deadline")
		st := c.nodes["b"].node.Stats().Remote
		assert.Equal(t, uint64(1), st.Abandoned)
		assert.Equal(t, uint64(2), st.Notified)
		assert.Zero(t, st.Passed, "no answer is not a pass")
	})
}

// Many consumers parked on a gateway, then a backlog on the owner: each notification spends
// the gateway's one token there, and the gateway registers a fresh one at once while
// consumers still wait, so every parked consumer is served a few round trips apart. Before,
// the token came back at the keeper's next pass (tokens.KeepInterval, 500 ms), one record
// per pass, and the last of ten consumers waited seconds while the owner held records.
func TestParkedConsumersDrainABacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		defer c.close()
		g := c.nodes["g"]
		const parked = 10
		var got []<-chan []router.Message
		for range parked {
			got = append(got, g.async(context.Background(), router.ConsumeOptions{Wait: 30 * time.Second}))
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		require.Equal(t, parked, g.node.Parked("orders"))
		start := time.Now()
		c.produce(0, parked)
		for i, ch := range got {
			msgs := <-ch
			require.Len(t, msgs, 1, "consumer %d", i)
		}
		assert.Less(t, time.Since(start), time.Duration(parked)*10*rtt, "every parked consumer served a few round trips apart")
	})
}

// Checklist 96, 97: a record quarantined above an unsettled one is nothing an owner can hand
// out, so it promises it to no parked remote consumer. Counted, it drew a notification, a
// claim that found nothing, a registration again and another notification, round trip after
// round trip, for as long as the record below stayed unsettled.
func TestQuarantinedRecordIsNotPromised(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		defer c.close()
		ctx := context.Background()
		b := c.nodes["b"].node
		c.produce(0, 2)
		held, err := b.Consume(ctx, "orders", router.ConsumeOptions{})
		require.NoError(t, err)
		require.Len(t, held, 1)
		rejected, err := b.Consume(ctx, "orders", router.ConsumeOptions{})
		require.NoError(t, err)
		require.Len(t, rejected, 1)
		require.NoError(t, b.Reject(ctx, "orders", rejected[0].Receipt))

		got := c.nodes["g"].async(ctx, router.ConsumeOptions{Wait: time.Minute})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		assert.Zero(t, b.Stats().Remote.Notified, "nothing to hand out: offset 0 held, offset 1 quarantined")

		// The held record's ack moves the frontier over both; a new record reaches g.
		require.NoError(t, b.Ack(ctx, "orders", held[0].Receipt))
		c.produce(0, 1)
		msgs := <-got
		require.Len(t, msgs, 1)
		assert.Equal(t, int64(2), msgs[0].Offset)
	})
}

// However many records are quarantined above the unsettled one: Available looked at 256 of the
// quarantine at most, and past that counted every quarantined record again, so the owner
// notified the parked consumer of records it could not hand out, round trip after round trip.
func TestManyQuarantinedRecordsAreNotPromised(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const rejected = 300
		c := newCluster(t, rtt, map[string][]int32{"b": {0}, "g": nil}, nil)
		defer c.close()
		ctx := context.Background()
		b := c.nodes["b"].node
		c.produce(0, 1+rejected)
		held, err := b.Consume(ctx, "orders", router.ConsumeOptions{})
		require.NoError(t, err)
		require.Len(t, held, 1)
		for taken := 0; taken < rejected; {
			msgs, err := b.Consume(ctx, "orders", router.ConsumeOptions{Max: 100})
			require.NoError(t, err)
			require.NotEmpty(t, msgs)
			for _, m := range msgs {
				require.NoError(t, b.Reject(ctx, "orders", m.Receipt))
			}
			taken += len(msgs)
		}

		got := c.nodes["g"].async(ctx, router.ConsumeOptions{Wait: time.Minute})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		assert.Zero(t, b.Stats().Remote.Notified, "nothing to hand out: offset 0 held, the rest quarantined")

		require.NoError(t, b.Ack(ctx, "orders", held[0].Receipt))
		c.produce(0, 1)
		msgs := <-got
		require.Len(t, msgs, 1)
		assert.Equal(t, int64(1+rejected), msgs[0].Offset)
	})
}
