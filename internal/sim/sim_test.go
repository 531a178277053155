package sim_test

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"narad.dev/consume/internal/sim"
	"narad.dev/consume/internal/testflags"
)

var (
	seedFlag = flag.Uint64("seed", 0, "run this seed alone (with -v, its events are logged)")
	fromFlag = flag.Uint64("from", 1, "the first seed TestSeeds runs")
)

// seeds is how many seeds TestSeeds runs: SIM_SEEDS, or 2,000 (100 under -race: CI runs the
// 2,000 without it).
func seeds(t *testing.T) int {
	if v := os.Getenv("SIM_SEEDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SIM_SEEDS=%q: want a positive count", v)
		}
		return n
	}
	if testflags.Race {
		return 100
	}
	return 2000
}

func replay(seed uint64) string {
	return fmt.Sprintf("go test ./internal/sim -run 'TestSeeds$' -seed=%d -v", seed)
}

// libraryBugs are the library bugs the simulation found. TestLibraryRegressions runs their
// seeds strictly, fixed or not; TestSeeds tolerates the kind of violation of a bug not fixed
// yet (counts it and checks on). Once a bug is fixed, mark it fixed: its seeds stay.
var libraryBugs = []struct {
	kind      string
	seeds     []uint64
	diagnosis string
	fixed     string // how it was fixed; empty while it is not
	// schedule is the options of the run that found it; nil: NoMoves, NoStore and
	// OldSchedule (the bugs found before moves, the store and the fault classes of graceful
	// degradation were simulated).
	schedule *sim.Options
}{
	{
		kind:  sim.KindOldOwner400,
		seeds: []uint64{24, 1827},
		diagnosis: "a node at WireVersion 3 or more whose remote owners run WireVersion 2 (a release before the consume op, " +
			"as during the rolling restart that lifts the version pin) probes them on every consume: the owner refuses op 5 " +
			"(status 6), remoteConsume returns errorOf(StatusUnsupported), which wraps ErrInvalidArgument, and Consume answers it " +
			"(HTTP 400) when every owner failed, where it documents ErrTransport or ErrUnavailable; nothing remembers the " +
			"refusal (as a lane's acklane.ConsumeClaim does for a field), so every consume, every keeper poll (100 ms to 1 s) and every " +
			"Cancel and Replay costs another refused frame: a 20 s long-poll on a gateway costs 26 (invariant 14)",
		fixed: "a refusal of the consume op answers ErrUnavailable and is remembered per owner for two minutes " +
			"(a lane's acklane.ConsumeOp): the owner counts as down for consumes, registrations, polls and replays",
	},
	{
		kind:  sim.KindCrashThenPowerCut,
		seeds: []uint64{414, 1983},
		diagnosis: "an ack that reached the page cache but not the disk before a process crash stays unsynced in the " +
			"restarted process until it first touches the partition and primes it on its next tick; a power cut before " +
			"then loses it however long ago it was acked, outside invariant 6's windows (seed 1983: acked at 1.026 s, " +
			"process crash at 1.529 s, the restarted process runs from 2.529 s to a power cut at 5.529 s without touching " +
			"the partition, and the ack, 4.5 s old, comes back); and a frontier the restarted process loaded and served is " +
			"undercut when the cut comes within that tick, against invariant 5 (seed 414: acked at 10.433 s, process crash " +
			"at 10.575 s, the restarted process loads the partition at 11.699 s answering a settle of it, power cut at " +
			"11.740 s, the ack comes back)",
		fixed: "router.New makes everything under Config.Dir durable before the node serves (syncfs on Linux, an " +
			"fsync per file elsewhere, FS.SyncTree for a host's FS)",
	},
	{
		kind:  sim.KindSparseLatency,
		seeds: []uint64{9107, 11598},
		diagnosis: "a consumer parked across a topic's delete and recreate uncounted itself from the new incarnation's " +
			"state (the node looked the topic up by name when it left), so the count of consumers parked on the node " +
			"fell below the truth and a notification for a consumer still parked was passed: its record came only " +
			"with the next registration, seconds late",
		fixed: "a consumer uncounts itself from the state it counted itself in (parkRemote returns it)",
	},
	{
		kind:  sim.KindPromise,
		seeds: []uint64{50540},
		diagnosis: "an owner retired a hold when its notification got no reply, at the end of the notification's " +
			"budget, which is the hold's length: by then that hold had lapsed, and the retire ended the requester's " +
			"next hold instead, one the requester had answered yes to and could still claim, so the record was " +
			"promised again (seed 50540: notify at 1.173 s, reply dropped, a second notify at 1.428 s answered yes, " +
			"the first's budget ends at 2.173 s and retires the second's hold; three holds for two records at 2.224 s)",
		fixed: "a hold has an identity (tokens.Hold): a notification without an answer ends its own hold " +
			"(tokens.Queue.Abandon) after the notification's budget, never another; a peer's answer other than yes " +
			"retires its hold at once (tokens' queue model, router.TestUnansweredNotificationMovesOn). The seed no " +
			"longer runs the course above: the schedule drifted (its first notification now comes at 0.207 s, none of " +
			"its notifications goes unanswered), and the budget is now min(250 ms, half the hold), so the abandon comes " +
			"while the hold it ends is live. The bug put back whole (the budget the hold's length, the abandon retiring " +
			"the requester's oldest live hold) fails no seed of 3,000 of this schedule, 3,000 of TestSeeds' and 2,000 " +
			"with paused owners: the unit tests guard it, the seed only runs",
	},
	{
		kind:  sim.KindOther,
		seeds: []uint64{165, 304},
		diagnosis: "Persist (a Durable wait) while fdatasync fails spun the committer: after a failed writeout with a " +
			"waiter pending, the writeout worker kicked Run at once, which wrote out again, failed again and kicked " +
			"again, so the simulated clock stood still and the wait's deadline never came (a busy loop on a real " +
			"machine); the seed hangs when the bug is back",
		fixed: "after a failed writeout, pending waits wait for the next tick instead of an immediate retry",
	},
	{
		kind:  sim.KindEarlyQuarantine,
		seeds: []uint64{15, 1555},
		diagnosis: "under MaxDeliveries a lease given back unprocessed (inflight.Shard.GiveBack: a consumer's Release, a Cancel, " +
			"a record the pump handed a consumer that left) uncounts its attempt in memory only: giveBackLocked reports no " +
			"effects, so the partition is not marked dirty, and unless something else dirties it before the next writeout " +
			"the count on disk keeps the attempt; the next process (a graceful restart too) restores it and quarantines the " +
			"record at its next reserve, after fewer deliveries that count than MaxDeliveries (seed 15: 0/14 nacked at " +
			"19.541 s, leased again, released at 20.541 s, graceful restart at once, quarantined \"after 2 attempts\" with " +
			"MaxDeliveries 2 on the first reserve of the new process; seed 1555: 0/17@1 leased through g0, its owner, once, " +
			"released through g1 with a forwarded Release at 14.850 s, graceful restart of g0 at 14.885 s, quarantined " +
			"\"after 1 attempts\" with MaxDeliveries 1)",
		fixed: "giveBackLocked reports the shard dirty under MaxDeliveries, so the uncounted attempt is written out " +
			"like the count it undoes (router.TestReleaseUncountsOnDisk)",
		schedule: &sim.Options{NoOrdered: true}, // the course it ran before ordered topics were drawn
	},
	{
		kind:  sim.KindKeyOrder,
		seeds: []uint64{691, 1626, 2117},
		diagnosis: "on an ordered topic a hand-off loses a nacked record's place at the head of its key: the moved state " +
			"carries the nack's delay, but Adopt (bindHeldKeys) binds only the live leases it brought, so the new owner's key " +
			"index knows nothing of the delayed record, and its scan binds and delivers the key's next record before the " +
			"delayed one comes back (seed 691: 1/5, key0, leased by o1 at 9.786 s, nacked with a 300 ms delay within " +
			"[10.789, 10.807] s; o1 hands partition 1 off to g0 at 10.854 s; g0 delivers 1/6, key0, at 10.908 s, before 1/5)",
		fixed: "Adopt reads the delayed records a move brings and queues them under their keys (inflight.Shard.QueueKeys), " +
			"so the key's later records wait for them (router.TestOrderedTopicMoveKeepsANackedRecordFirst)",
		schedule: &sim.Options{Ordered: true},
	},
	{
		kind:  sim.KindPromise,
		seeds: []uint64{9597, 11106, 12989},
		diagnosis: "an owner counted, in what it could hand other nodes (Node.available), the shard of a partition whose " +
			"ownership grant had lapsed unrenewed (inflight.Shard.Available knows nothing of grants): a paused or cut-off " +
			"owner whose partitions failed over while it lived, its routes stale, fired tokens for records it could no " +
			"longer lease and its successor had settled (seed 9597: o0 paused at 6.385 s, its grants lapse at 9.000 s, " +
			"partitions 0 and 2 fail over to g0 at 9.386 s, which leases and acks their records; o0 resumes at 12.572 s, " +
			"the registrations that waited for it make it look, and it promises 2 records to g0 and g1 where 1 was left; " +
			"seed 12989: o2 cut off, partition 2 failed over to o3, o2 reconnects and promises a record acked at o3)",
		fixed: "Node.available asks the host again for a lapsed shard's grant, as a consume does (renew): one kept alive " +
			"thaws and counts, so an idle partition's next record is still offered at once; one lapsed or granted " +
			"anew is left out, and nothing of it is promised (router.TestLapsedGrantPromisesNothing, " +
			"TestKeptGrantOffersAtOnce)",
		schedule: &sim.Options{Zombies: true, CutOffs: true},
	},
	{
		kind:  sim.KindLateReturn,
		seeds: []uint64{2845},
		diagnosis: "a consume that split a read-ahead probe's reply as the topic was deleted (or the node closed) " +
			"gave the rest back to its owner from its own goroutine (readAhead.hold, closed), and waited for that RPC: " +
			"a frame lost cost it the forward budget, 2 s, past its wait and ConsumeOverrun (seed 2845: a consume on g2 " +
			"with a wait of 500 ms began at 14.096 s and returned at 16.098 s; ordered seed 5933 the same on g1, its " +
			"give-back's AckBatch dropped at 35.573 s)",
		fixed:    "hold gives a closed read-ahead's records back in the background",
		schedule: &sim.Options{},
	},
	{
		kind:  sim.KindSettleAnswer,
		seeds: []uint64{491},
		diagnosis: "an ordered partition restored with key tails (its parked records kept inside the acked-ahead runs) " +
			"answered a settle of a record acked before the restart ErrGone rather than ErrAlreadySettled: until its scan " +
			"has verified the runs' records it cannot tell an acked one from a parked one (seed 491: an extend of 1/4 " +
			"through o0 at 5.983 s)",
		fixed:    "a settle of a shard whose tails are not verified yet verifies them first (router.verifyBeforeSettle)",
		schedule: &sim.Options{Ordered: true},
	},
	{
		kind:  sim.KindLost,
		seeds: []uint64{730},
		diagnosis: "parked records verified after a failover waited for the cursor to pass the records below them, and " +
			"the key waiting for it was forgotten as soon as it looked passed once: a record unparked below the " +
			"cursor's run made it unpassed again, and nothing freed the key after (seed 730: 0/6, 0/7, 0/8 of key1 " +
			"deferred for good on g1 after 0/4 was acked at 16.765 s)",
		fixed:    "a verified key waits (releaseAwaitingLocked) until the cursor has passed every record of it",
		schedule: &sim.Options{Ordered: true, NoQuarantineKeys: true}, // the course it ran before quarantined keys were drawn
	},
	{
		kind:  sim.KindOldOwner400,
		seeds: []uint64{12670, 17004, 24615, 25554, 37434},
		diagnosis: "consumes a gateway queued for a ConsumeBatch (past the lane's consume window) while the window's own " +
			"consumes were on their way to an owner at WireVersion 2 left as one ConsumeBatch; refused, it went again " +
			"member by member (consumesAlone), each a Consume frame the owner refused again, though the window's " +
			"consumes had learned of the refusal of the op by then (seed 24615: two probes refused at 1 ms, the batch " +
			"sent then, refused at 3 ms, its two members sent alone and refused at 5 ms)",
		fixed: "a queued consume is not sent (in a batch or alone) once its owner refused the consume op: it answers " +
			"ErrUnavailable (router.TestOwnerBeforeConsumeRefusesQueuedOnce)",
		schedule: &sim.Options{Zombies: true, CutOffs: true},
	},
	{
		kind:  sim.KindSparseLatency,
		seeds: []uint64{18651, 55601},
		diagnosis: "a registration whose frame got no reply (lost, or to an owner paused or cut off) forgot, when its " +
			"budget ended, whatever registration the requester then held with that owner for the topic: one sent " +
			"later, which had arrived, so the owner's notification for it was passed as one for no token and the " +
			"record waited for the keeper's next registration, up to tokens.KeepInterval (seed 55601: a registration " +
			"sent at 32.53 s as o0 and g0 paused got no reply; the sparse stream's consumer registered again at " +
			"34.443 s; the first's budget ended at 34.53 s and forgot it; o0's notification at 34.543 s was passed, " +
			"the record came 402 ms after its append)",
		fixed: "a failed registration forgets only itself (tokens.Registrations.Lost: not one sent since) " +
			"(router.TestLostRegistrationForgetsOnlyItself, tokens.TestRegistrationsLost)",
		schedule: &sim.Options{Zombies: true, CutOffs: true},
	},
	{
		kind:  sim.KindHeldTooLong,
		seeds: []uint64{37446, 44891, 54092},
		diagnosis: "the bug of seed 2845 (a consume that split a read-ahead probe's reply as the topic was deleted waited " +
			"for the give-back's RPC), with an owner cut off or a gateway paused: the give-back's frame was lost, and the " +
			"record the consume kept reached its consumer a forward budget (2 s) after its grant, caught as held past " +
			"the hold before the late return (seed 44891: g0's probe leased 0/4 at 0.9 ms, the topic deleted at 1.4 ms " +
			"as o0 was cut off, 0/4 received at 2.0015 s; seed 37446: 2/12@1 leased at 14.303 s, received at 16.307 s; " +
			"seed 54092: 3/8 the same, with g0 paused, before the schedule drifted: it no longer splits a reply as the " +
			"topic is deleted, and passes with the bug put back, where 37446 and 44891 fail)",
		fixed:    "hold gives a closed read-ahead's records back in the background",
		schedule: &sim.Options{Zombies: true, CutOffs: true},
	},
	{
		kind:  sim.KindPromise,
		seeds: []uint64{70578, 81681},
		diagnosis: "an owner ended a hold for each answer of a notification the network delivered twice: a claim (one " +
			"copy spent the requester's registration and woke a consumer) and a pass (the other found no registration " +
			"outstanding); it ended the requester's oldest live hold on a pass as on a claim, so a pass arriving after " +
			"the claims had retired its own hold ended a later one, whose notification was still on its way, and the " +
			"record was promised again (seed 70578, ordered: o0 counts one record it could hand out, 1/1, quarantined " +
			"above the frontier, and notifies g1, whose claims find nothing, every few ms, a third of the frames " +
			"duplicated; notification 20 to g1 at 2.4255 s is delivered twice, and g1 answers one copy yes and the other " +
			"pass; g1's claims retire holds 20 and 21 by 2.4381 s, when notification 22 leaves; the pass answering 20 " +
			"reaches o0 at 2.4426 s and ends hold 22, and o0 notifies g1 again (23) at once: two notifications out, " +
			"unanswered, for one record. The checker then ended a hold at the requester's pass rather than at the " +
			"owner's, and caught the next such course, at 2.4598 s; seed 81681 the same between owners o4 and o2, RTT 1 ms, " +
			"o4 counting 4/5, quarantined above its frontier: the pass answering notification 47 ends hold 49 at " +
			"15.2085 s, the pass answering 49 ends hold 50 at 15.2095 s, and 51 leaves for the one record while 50 is " +
			"unanswered)",
		fixed: "a pass answering a notification ends that notification's hold and no other (tokens.Queue.End; " +
			"router.TestPassEndsItsOwnHold, tokens' queue table and model); a pass in a frame of its own still retires " +
			"the requester's oldest hold",
		schedule: &sim.Options{},
	},
	{
		kind:      sim.KindLateReturn,
		seeds:     []uint64{5933},
		diagnosis: "the same, on an ordered topic",
		fixed:     "hold gives a closed read-ahead's records back in the background",
		schedule:  &sim.Options{Ordered: true},
	},
	{
		kind:  sim.KindFieldRefusals,
		seeds: []uint64{100050},
		diagnosis: "a consume to an owner on an older release that refused one of its fields sent the frame again without " +
			"that field alone: the fields the owner refused meanwhile, which other consumes to it had learnt, were " +
			"refused again, one refused request per field and consume in flight rather than one per field (seed " +
			"100050: g0 at the newest release, o0 at V3, concurrent consumes each refused the Compact flag, the " +
			"Headers flag, relative expiry and Max in turn)",
		fixed: "a refused consume is sent again as the owner's lane says now (router.Node.consumeTo): without every " +
			"field the owner refused lately, those other consumes learnt included",
		schedule: &sim.Options{},
	},
	{
		kind:  sim.KindFieldRefusals,
		seeds: []uint64{100954},
		diagnosis: "a consume frame queued for a batch is sent, in the batch or alone, as it was encoded when it was " +
			"queued: a field the owner on an older release refused meanwhile, which another consume had learnt, is " +
			"refused again (seed 100954: a consume batch to o0 at V4 refused as an op, its members sent alone at " +
			"5.384-5.394 s with the Headers flag o0 had refused 22 ms before)",
		fixed: "a queued consume carrying a field its owner refused since it queued is not sent: its caller sends " +
			"it again as the lane says now (router.errRefusedSince)",
		schedule: &sim.Options{},
	},
	{
		kind:  sim.KindFieldRefusals,
		seeds: []uint64{400341},
		diagnosis: "a consume queued to share a ConsumeBatch frame whose consumer left before the batch came back " +
			"(seed 400341: a claim of o2's at 17.191 s, cancelled at once) had its member's reply read only for " +
			"records to give back: the owner's 400 refusing a field (Max, o1 at V5) was learnt by nobody, and a " +
			"long-poll of 100 records sent Max to o1 again at 37.509 s",
		fixed: "the reply of a member nobody receives is read for the field it refuses too (router.abandonedMember, " +
			"which learns it with learnConsumeRefusal, as remoteConsume does)",
		schedule: &sim.Options{},
	},
	{
		kind:  sim.KindSparseLatency,
		seeds: []uint64{9002267},
		diagnosis: "a record a probe brought after its consume parked (the probe out past the hedge) was given back " +
			"while that consume waited for it (seed 9002267: o1 at V5, MaxDeliveries 1, its probe's reply with 0/10 " +
			"at 19.322 s; the release went to o1 as a nack, which counted the attempt, and o1 quarantined the sparse " +
			"record unread)",
		fixed:    "a parked consume takes what a probe it left out brings (router.hedgedProbes.late, Node.waitOrProbe)",
		schedule: &sim.Options{},
	},
	{
		kind:  sim.KindHeldTooLong,
		seeds: []uint64{9030790, 9042094},
		diagnosis: "the first version of the fix above took a late probe's records whenever the parked consume came " +
			"back from something else (a claim): seed 9042094 handed 0/4 over 1.1 s after its lease was granted, " +
			"past its expiry",
		fixed:    "a late probe's records are taken within the hold of reading ahead of their reply's arrival, or given back",
		schedule: &sim.Options{},
	},
}

// knownKinds are the kinds of violation of the bugs not fixed yet.
func knownKinds() []string {
	var kinds []string
	for _, b := range libraryBugs {
		if b.fixed == "" {
			kinds = append(kinds, b.kind)
		}
	}
	return kinds
}

// TestLibraryRegressions runs the seeds that found library bugs, strictly: a fixed bug's
// seeds must pass (it fails with the diagnosis if the bug ever comes back); a bug not fixed
// yet must still show on its seeds as the violation it was reported as (once it no longer
// does, mark it fixed).
func TestLibraryRegressions(t *testing.T) {
	for _, b := range libraryBugs {
		for _, seed := range b.seeds {
			t.Run(fmt.Sprintf("%s/%d", b.kind, seed), func(t *testing.T) {
				opts := sim.Options{NoMoves: true, NoStore: true, OldSchedule: true}
				if b.schedule != nil {
					opts = *b.schedule
				}
				_, err := runSeed(t, seed, opts)
				env := "SIM_STRICT=1"
				if opts.Ordered {
					env += " SIM_ORDERED=1"
				}
				if opts.Zombies {
					env += " SIM_ZOMBIES=1"
				}
				if opts.NoQuarantineKeys {
					env += " SIM_NO_QUARANTINE_KEYS=1"
				}
				var v *sim.Violation
				switch {
				case b.fixed != "" && err != nil:
					t.Errorf("library bug, fixed (%s), and back: %s\n%v\nreplay: %s %s", b.fixed, b.diagnosis, err, env, replay(seed))
				case b.fixed == "" && err == nil:
					t.Errorf("library bug reported and not fixed yet, and its seed passes: if it is fixed, say how (%s)", b.diagnosis)
				case b.fixed == "" && (!errors.As(err, &v) || v.Kind != b.kind):
					t.Errorf("library bug reported and not fixed yet (%s): its seed fails otherwise: %v\nreplay: %s %s", b.diagnosis, err, env, replay(seed))
				case b.fixed == "":
					t.Logf("library bug reported, not fixed yet: %s\nreplay: %s %s", v.What, env, replay(seed))
				}
			})
		}
	}
}

// TestCheckerRegressions runs seeds whose schedules once fooled the checker into a false
// alarm (a batch holding an expired and a live lease of one record, a duplicated frame's copy
// applied first, an extend that shortened a lease, a settle on its way as the owner fired a
// token, a disk that held the committer's window back, a drain too slow for a small in-flight
// cap, a retention jump that settled a live lease of a trimmed record, holds of a deleted
// incarnation of the topic counted against the new one's records, a trim and the jump it
// caused at the very instant of a settle, a lease left to lapse on a record made unreadable
// that ended during the sparse stream and woke its consumer for nothing, a sparse record
// appended while its consumer still probed the owners one by one; in runs with paused owners,
// a notification to a node paused past its budget, which the owner abandoned at the budget
// and the checker held to the hold's end, and a record nacked through an owner as it resumed,
// promised to a token and leased to a consumer at one instant; in runs with the fault classes
// of graceful degradation, a sparse record claimed from an owner on an older release that
// refused the claim's newer fields one round trip at a time, the first claim since the
// consumer's node restarted): each must pass.
func TestCheckerRegressions(t *testing.T) {
	for _, seed := range []uint64{3, 4, 12, 16, 35, 53, 259, 299, 521, 601, 679, 735, 958, 1589, 4241, 5648, 5984, 113315, 119873, 214062, 507640, 781841} {
		if _, err := runSeed(t, seed, sim.Options{Tolerate: knownKinds(), NoMoves: true, NoStore: true, OldSchedule: true}); err != nil { // the schedule that fooled it
			t.Errorf("%v\nreplay: %s", err, replay(seed))
		}
	}
	for _, seed := range []uint64{6197, 9175, 27457, 33581, 40868, 56361, 59204} {
		if _, err := runSeed(t, seed, sim.Options{Tolerate: knownKinds(), Zombies: true, CutOffs: true}); err != nil {
			t.Errorf("%v\nreplay: SIM_ZOMBIES=1 %s", err, replay(seed))
		}
	}
	for _, seed := range []uint64{102282} {
		if _, err := runSeed(t, seed, degradeOptions()); err != nil {
			t.Errorf("%v\nreplay: SIM_DEGRADE_SEEDS=1 go test ./internal/sim -run 'TestDegradeSeeds$' -from=%d", err, seed)
		}
	}
}

// runSeed runs one seed in a bubble of its own.
func runSeed(t *testing.T, seed uint64, opts sim.Options) (rep sim.Report, err error) {
	synctest.Test(t, func(t *testing.T) {
		rep, err = sim.Run(seed, opts)
	})
	return rep, err
}

// TestSeeds runs the simulation over many seeds (SIM_SEEDS, -from), or one (-seed), and
// reports what they exercised: seeds per minute and the faults, for BENCHMARKS.md. Each seed
// covers, as its swarm draws them, checklist 1 and 2 (process crashes and power cuts at any
// point of the committer's work), 3 (failing syncs), 4 (ENOSPC), 6 (stale settles), 7
// (forged handles), 9 (duplicated acks), 11 (loss, duplication, reordering, partitions), 12
// (restarts with tokens outstanding), 13 (older releases), 14 (retention), 15 (corrupt
// records), 16 (cancelled consumes) and 19 (the topic deleted and created again).
func TestSeeds(t *testing.T) {
	if *seedFlag != 0 {
		// One thread replays a seed more exactly: goroutines that act at the same instant of
		// the fake clock then run in an order that depends less on the machine.
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
		opts := sim.Options{Tolerate: knownKinds()}
		if os.Getenv("SIM_STRICT") != "" {
			opts.Tolerate = nil
		}
		if testing.Verbose() {
			opts.Logf = t.Logf
		}
		if os.Getenv("SIM_ZOMBIES") != "" { // TestZombieSeeds's options
			opts.Zombies, opts.CutOffs = true, true
		}
		if os.Getenv("SIM_ORDERED") != "" { // TestOrderedSeeds's options
			opts.Ordered = true
		}
		if os.Getenv("SIM_NO_QUARANTINE_KEYS") != "" { // the course before quarantined keys were drawn
			opts.NoQuarantineKeys = true
		}
		rep, err := runSeed(t, *seedFlag, opts)
		if err != nil {
			t.Fatalf("%v\nreplay: %s", err, replay(*seedFlag))
		}
		t.Logf("seed %d: %+v", *seedFlag, rep)
		for k, n := range rep.Tolerated {
			t.Logf("known library bug %q hit %d times, first: %s", k, n, rep.FirstTolerated[k])
		}
		return
	}
	n := seeds(t)
	workers := runtime.GOMAXPROCS(0)
	var (
		mu        sync.Mutex
		total     sim.Report
		faults    sim.Faults
		failures  []string
		simTime   time.Duration
		maxDrain  time.Duration
		sparse    int
		sparseMax time.Duration
		by        = map[string]int{}
		known     = map[string][]uint64{} // seeds that hit each known library bug
		storeRuns int                     // runs keeping the ack state in the shared store
		storeFail int                     // failovers of those runs, from the store
		// The runs with each fault class of graceful degradation, and with MaxDeliveries.
		hangRuns, skewRuns, liarRuns, maxDevRuns, quarantined int
		overrun, overrunBound                                 time.Duration
		held, heldBound                                       time.Duration // see Report.HeldMax
		handedOver                                            uint64        // records handed over from what gateways read ahead
		// The runs whose nodes served under grants in time (paused or cut-off owners).
		grantRuns int
		// The runs whose topic was ordered, and what they did of it.
		orderedRuns int
		ordered     sim.Report
	)
	total.AckedRedeliveredBy = by
	start := time.Now()
	next := *fromFlag
	end := *fromFlag + uint64(n)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			t.Run(fmt.Sprintf("worker%d", w), func(t *testing.T) {
				for {
					mu.Lock()
					seed := next
					next++
					stop := seed >= end || len(failures) >= maxFailures()
					mu.Unlock()
					if stop {
						return
					}
					rep, err := runSeed(t, seed, sim.Options{Tolerate: knownKinds()})
					mu.Lock()
					if err != nil {
						failures = append(failures, fmt.Sprintf("%v\nreplay: %s", err, replay(seed)))
					}
					faults.Add(rep.Faults)
					if rep.Store {
						storeRuns++
						storeFail += rep.Faults.Failovers
					}
					simTime += rep.SimTime
					maxDrain = max(maxDrain, rep.Drain)
					sparse += rep.Sparse
					total.Produced += rep.Produced
					total.Deliveries += rep.Deliveries
					total.Acked += rep.Acked
					total.AckedMaybe += rep.AckedMaybe
					total.Duplicates += rep.Duplicates
					total.Remote += rep.Remote
					total.Refusals += rep.Refusals
					total.MoveRefusals += rep.MoveRefusals
					total.CarriedSettles += rep.CarriedSettles
					total.Settles += rep.Settles
					total.Replays += rep.Replays
					total.Polls += rep.Polls
					if rep.Sparse > 0 {
						sparseMax = max(sparseMax, rep.SparseMax)
					}
					if rep.Faults.Hangs > 0 {
						hangRuns++
					}
					if rep.Faults.SkewedNodes > 0 {
						skewRuns++
					}
					if rep.Faults.Forged > 0 {
						liarRuns++
					}
					if rep.MaxDeliveries > 0 {
						maxDevRuns++
						quarantined += rep.Quarantined
					}
					if rep.Grants {
						grantRuns++
					}
					if rep.Ordered {
						orderedRuns++
						ordered.KeyedDeliveries += rep.KeyedDeliveries
						ordered.KeyBatches += rep.KeyBatches
						ordered.Deferred += rep.Deferred
					}
					total.StaleSettles += rep.StaleSettles
					total.StaleConsumes += rep.StaleConsumes
					total.DeposedRefusals += rep.DeposedRefusals
					total.DurableAcks += rep.DurableAcks
					overrun, overrunBound = max(overrun, rep.Overrun), max(overrunBound, rep.OverrunBound)
					held, heldBound = max(held, rep.HeldMax), max(heldBound, rep.HeldBound)
					handedOver += rep.AheadHandedOver
					total.AckedRedelivered += rep.AckedRedelivered
					for k, v := range rep.AckedRedeliveredBy {
						by[k] += v
					}
					for k := range rep.Tolerated {
						known[k] = append(known[k], seed)
					}
					total.Steps += rep.Steps
					mu.Unlock()
				}
			})
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	ran := int(min(next, end) - *fromFlag)
	t.Logf("%d seeds in %v on %d workers: %.0f seeds/minute; %v of cluster time", ran, elapsed.Round(time.Millisecond),
		workers, float64(ran)/elapsed.Minutes(), simTime.Round(time.Second))
	t.Logf("workload: %d steps, %d records produced, %d deliveries (%d through a node not owning the record, %d of a record delivered before), "+
		"%d settles (%d acks answered success, %d answered 502), %d long-polls, %d records replayed, %d frames refused by older releases",
		total.Steps, total.Produced, total.Deliveries, total.Remote, total.Duplicates, total.Settles, total.Acked, total.AckedMaybe,
		total.Polls, total.Replays, total.Refusals)
	t.Logf("faults: %v", faults)
	t.Logf("moves: %d settles refused while their partition moved, %d settles of leases a hand-off carried to a new owner",
		total.MoveRefusals, total.CarriedSettles)
	t.Logf("state store: %d runs kept the ack state in one shared store, %d failovers adopted from it", storeRuns, storeFail)
	t.Logf("degradation: %d runs with hung nodes (%d hangs, %d frames lost to them), %d with skewed clocks (%d nodes), "+
		"%d with a lying peer (%d frames forged, %d of them notifications), %d with MaxDeliveries (%d records quarantined)",
		hangRuns, faults.Hangs, faults.HungFrames, skewRuns, faults.SkewedNodes, liarRuns, faults.Forged, faults.ForgedNotifies, maxDevRuns, quarantined)
	t.Logf("ownership in time: %d runs with grants (%d owners paused, %d cut off, %d partitions failed over from a live owner); "+
		"%d settles and %d consumes through stale routes, %d settles refused by a deposed owner or stale routes, %d durable acks",
		grantRuns, faults.Pauses, faults.CutOffs, faults.LiveFailovers, total.StaleSettles, total.StaleConsumes, total.DeposedRefusals, total.DurableAcks)
	t.Logf("ordered topics: %d runs; %d deliveries of keyed records judged in order, %d responses holding several records of one key, %d records deferred behind their keys",
		orderedRuns, ordered.KeyedDeliveries, ordered.KeyBatches, ordered.Deferred)
	t.Logf("consume returns: the latest came %v after the end of its wait (bound: ConsumeOverrun + 2 trips + 10 ms, at most %v)", overrun, overrunBound)
	t.Logf("reading ahead: %d records handed over from what gateways read ahead; the longest a record another node leased took to reach its consumer: %v (bound: the hold and a round trip, at most %v)",
		handedOver, held, heldBound)
	if ran >= 100 && handedOver == 0 {
		t.Errorf("%d seeds and no record handed over from what a gateway read ahead: the bound on the hold was not put to the test", ran)
	}
	t.Logf("acked records delivered again: %d, each explained: %v", total.AckedRedelivered, by)
	t.Logf("liveness: the slowest drain acked its last record %v after the faults healed (bound: visibility timeout + 6 s); "+
		"sparse stream: %d records timed, the slowest %v", maxDrain, sparse, sparseMax)
	for _, kind := range slices.Sorted(maps.Keys(known)) { // once a kind, whatever bugs share it
		seeds := known[kind]
		t.Logf("known library bug %q (see TestLibraryRegressions) hit by %d seeds, the first %v", kind, len(seeds), seeds[:min(len(seeds), 5)])
	}
	for _, f := range failures {
		t.Error(f)
	}
}

// maxFailures is how many failing seeds stop TestSeeds: SIM_MAX_FAILURES, or 5.
func maxFailures() int {
	if n, err := strconv.Atoi(os.Getenv("SIM_MAX_FAILURES")); err == nil && n > 0 {
		return n
	}
	return 5
}

// TestStoreSeeds runs seeds with the shared state store and the hand-off step on whatever
// they draw (SIM_STORE_SEEDS, or 150), so that every run checks the store's window and
// that a deposed owner saves nothing.
func TestStoreSeeds(t *testing.T) {
	n := 150
	if v := os.Getenv("SIM_STORE_SEEDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("SIM_STORE_SEEDS=%q: want a positive count", v)
		}
	}
	if testflags.Race {
		n = min(n, 20)
	}
	var moves, failovers int
	for seed := *fromFlag; seed < *fromFlag+uint64(n); seed++ {
		rep, err := runSeed(t, seed, sim.Options{Store: true, Moves: true, Tolerate: knownKinds()})
		if err != nil {
			t.Errorf("%v\nreplay: SIM_STORE_SEEDS=1 go test ./internal/sim -run 'TestStoreSeeds$' -from=%d", err, seed)
			continue
		}
		if !rep.Store {
			t.Fatalf("seed %d: Options.Store set, and the run kept its ack state in files", seed)
		}
		moves += rep.Faults.Moves
		failovers += rep.Faults.Failovers
	}
	t.Logf("%d seeds with the state store: %d hand-offs, %d failovers from the store", n, moves, failovers)
	if moves == 0 {
		t.Errorf("no hand-off in %d seeds with Options.Moves", n)
	}
}

// TestDegradeSeeds runs seeds with the fault classes of graceful degradation on whatever
// they draw (SIM_DEGRADE_SEEDS, or 40): hung nodes, skewed clocks (where every node speaks
// the newest wire version), the lying peer, and MaxDeliveries 2, so that every run checks
// the bound on a consume's return, the early quarantine and the lying peer's frames.
func TestDegradeSeeds(t *testing.T) {
	n := 40
	if v := os.Getenv("SIM_DEGRADE_SEEDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("SIM_DEGRADE_SEEDS=%q: want a positive count", v)
		}
	}
	if testflags.Race {
		n = min(n, 10)
	}
	var faults sim.Faults
	quarantined := 0
	var overrun time.Duration
	for seed := *fromFlag; seed < *fromFlag+uint64(n); seed++ {
		rep, err := runSeed(t, seed, degradeOptions())
		if err != nil {
			t.Errorf("%v\nreplay: SIM_DEGRADE_SEEDS=1 go test ./internal/sim -run 'TestDegradeSeeds$' -from=%d", err, seed)
			continue
		}
		faults.Add(rep.Faults)
		quarantined += rep.Quarantined
		overrun = max(overrun, rep.Overrun)
	}
	t.Logf("%d seeds with the fault classes of graceful degradation: %d hangs (%d frames lost to them), %d skewed clocks, "+
		"%d forged frames (%d notifications), %d records quarantined; the latest consume returned %v after its wait",
		n, faults.Hangs, faults.HungFrames, faults.SkewedNodes, faults.Forged, faults.ForgedNotifies, quarantined, overrun)
	if faults.Hangs == 0 || faults.Forged == 0 || faults.SkewedNodes == 0 || quarantined == 0 {
		t.Errorf("a fault class forced on never showed in %d seeds", n)
	}
}

// degradeOptions are TestDegradeSeeds's options.
func degradeOptions() sim.Options {
	return sim.Options{Hangs: true, Skew: true, Liar: true, MaxDeliveries: 2, Tolerate: knownKinds()}
}

// TestRejectSeeds runs seeds with rejects on whatever they draw (SIM_REJECT_SEEDS, or 40),
// so that every run checks that a rejected record is settled for good (not lost, and not
// delivered again unless a crash or a disk fault of its owner undid the reject) and that a
// reject refused as unsupported changed nothing, on a path with an older release on it only.
func TestRejectSeeds(t *testing.T) {
	n := 40
	if v := os.Getenv("SIM_REJECT_SEEDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("SIM_REJECT_SEEDS=%q: want a positive count", v)
		}
	}
	if testflags.Race {
		n = min(n, 10)
	}
	var rejected, forwarded, refused, quarantined int
	for seed := *fromFlag; seed < *fromFlag+uint64(n); seed++ {
		rep, err := runSeed(t, seed, sim.Options{Rejects: true, Tolerate: knownKinds()})
		if err != nil {
			t.Errorf("%v\nreplay: SIM_REJECT_SEEDS=1 go test ./internal/sim -run 'TestRejectSeeds$' -from=%d", err, seed)
			continue
		}
		rejected += rep.Rejected
		forwarded += rep.ForwardedRejects
		refused += rep.RejectsRefused
		quarantined += rep.Quarantined
	}
	t.Logf("%d seeds with rejects: %d answered success (%d forwarded), %d refused by a path with an older release, %d records quarantined",
		n, rejected, forwarded, refused, quarantined)
	if rejected == 0 || forwarded == 0 || refused == 0 {
		t.Errorf("rejects forced on, and in %d seeds %d succeeded, %d forwarded, %d refused", n, rejected, forwarded, refused)
	}
}

// TestZombieSeeds runs seeds with the paused and the cut-off owners on whatever they draw
// (SIM_ZOMBIE_SEEDS, or 40), so that every run grants ownership in time and fails
// partitions over from owners that live on: no lease granted, settle answered success or
// save made under a lapsed grant, no ack answered success lost outside the window, through
// stale routes too.
func TestZombieSeeds(t *testing.T) {
	n := 40
	if v := os.Getenv("SIM_ZOMBIE_SEEDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("SIM_ZOMBIE_SEEDS=%q: want a positive count", v)
		}
	}
	if testflags.Race {
		n = min(n, 10)
	}
	var faults sim.Faults
	var total sim.Report
	by := map[string]int{}
	for seed := *fromFlag; seed < *fromFlag+uint64(n); seed++ {
		rep, err := runSeed(t, seed, sim.Options{Zombies: true, CutOffs: true, Tolerate: knownKinds()})
		if err != nil {
			t.Errorf("%v\nreplay: SIM_ZOMBIES=1 %s", err, replay(seed))
			continue
		}
		if !rep.Grants {
			t.Fatalf("seed %d: Options.Zombies set, and the nodes served without grants", seed)
		}
		faults.Add(rep.Faults)
		total.StaleSettles += rep.StaleSettles
		total.StaleConsumes += rep.StaleConsumes
		total.DeposedRefusals += rep.DeposedRefusals
		total.DurableAcks += rep.DurableAcks
		for k, v := range rep.AckedRedeliveredBy {
			by[k] += v
		}
	}
	t.Logf("%d seeds with paused and cut-off owners: %d pauses, %d cut-offs, %d partitions failed over from a live owner (%d from dead ones); "+
		"%d settles and %d consumes through stale routes, %d settles refused by a deposed owner or stale routes, %d durable acks; acked records delivered again: %v",
		n, faults.Pauses, faults.CutOffs, faults.LiveFailovers, faults.Failovers, total.StaleSettles, total.StaleConsumes, total.DeposedRefusals,
		total.DurableAcks, by)
	if faults.Pauses == 0 || faults.CutOffs == 0 || faults.LiveFailovers == 0 || total.StaleSettles == 0 {
		t.Errorf("a fault class forced on never showed in %d seeds", n)
	}
}

// TestOrderedSeeds runs seeds with the topic ordered whatever they draw (SIM_ORDERED_SEEDS, or
// 300), its records keyed from a small key set, so that every run checks one holder per key
// and a key's records in order, under the faults the seed draws.
func TestOrderedSeeds(t *testing.T) {
	n := 300
	if v := os.Getenv("SIM_ORDERED_SEEDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("SIM_ORDERED_SEEDS=%q: want a positive count", v)
		}
	}
	if testflags.Race {
		n = min(n, 20)
	}
	var total sim.Report
	var faults sim.Faults
	var quarantining, keyRuns, keyQuarantined int
	tolerated := map[string][]uint64{}
	for seed := *fromFlag; seed < *fromFlag+uint64(n); seed++ {
		rep, err := runSeed(t, seed, sim.Options{Ordered: true, Tolerate: knownKinds()})
		for k := range rep.Tolerated {
			tolerated[k] = append(tolerated[k], seed)
		}
		if err != nil {
			t.Errorf("%v\nreplay: SIM_ORDERED=1 %s", err, replay(seed))
			continue
		}
		if !rep.Ordered {
			t.Fatalf("seed %d: Options.Ordered set, and the topic was unordered", seed)
		}
		faults.Add(rep.Faults)
		total.KeyedDeliveries += rep.KeyedDeliveries
		total.KeyBatches += rep.KeyBatches
		total.Deferred += rep.Deferred
		total.Spilled += rep.Spilled
		total.Refilled += rep.Refilled
		total.Deliveries += rep.Deliveries
		if rep.MaxDeliveries > 0 || rep.Rejected > 0 || rep.Quarantined > 0 {
			quarantining++
		}
		if rep.QuarantineKeys {
			keyRuns++
			keyQuarantined += rep.Quarantined
			total.KeyFollowers += rep.KeyFollowers
		}
	}
	t.Logf("%d seeds with the topic ordered: %d deliveries, %d of keyed records judged in order, %d responses holding several records of one key, "+
		"%d records deferred behind their keys (%d spilled, %d read back); %d process crashes, %d power cuts, %d moves, %d failovers",
		n, total.Deliveries, total.KeyedDeliveries, total.KeyBatches, total.Deferred, total.Spilled, total.Refilled, faults.ProcessCrashes, faults.PowerCuts, faults.Moves, faults.Failovers)
	t.Logf("%d of them quarantining (MaxDeliveries or rejects), %d with QuarantineKeys: %d records quarantined, %d of them followers of their key (before MaxDeliveries)",
		quarantining, keyRuns, keyQuarantined, total.KeyFollowers)
	for k, seeds := range tolerated {
		t.Logf("tolerated %q in %d seeds, the first %v", k, len(seeds), seeds[:min(len(seeds), 5)])
	}
	if total.KeyedDeliveries == 0 || total.KeyBatches == 0 || total.Deferred == 0 {
		t.Errorf("the topic ordered in %d seeds, and %d keyed deliveries, %d batches of one key, %d records deferred", n, total.KeyedDeliveries, total.KeyBatches, total.Deferred)
	}
}
