package main

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"narad.dev/consume/router"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// smallConfig is a run of a few hundred operations on few accounts, so that workers often
// want the same account, with more crashes and nacks than the demo's, so that some happen.
func smallConfig(t *testing.T) config {
	return config{
		messages:    400,
		accounts:    10,
		partitions:  4,
		workers:     4,
		rate:        0,
		visibility:  300 * time.Millisecond, // short, so crashed batches come back soon
		dir:         t.TempDir(),
		progress:    100 * time.Millisecond,
		seed:        1,
		crashChance: 0.25, // a first-delivery batch in four: some crash whatever the timing makes the batches
		nackChance:  0.05,
	}
}

// TestOrdered runs the demo in-process and checks its summary: every check passes.
func TestOrdered(t *testing.T) {
	cfg := smallConfig(t)
	sum, out, err := runSmall(t, cfg)
	require.NoError(t, err)

	requireSound(t, sum, out)
	require.Equal(t, 399, sum.applied, "every operation but the poisoned one")
	require.Zero(t, sum.wrongBalances)
	require.True(t, sum.quarantinedAsExpected(), "quarantined: %v, poisoned: %v", sum.quarantined, sum.poisoned)
	require.Equal(t, uint32(maxDeliveries), sum.quarantined[0].attempts)
	require.Positive(t, sum.poisonFailures)
	require.Positive(t, sum.crashes, "the seed crashes some batches")
	require.GreaterOrEqual(t, sum.afterExpiry, sum.crashedOps, "each crashed record comes back once its lease lapses")
	require.Positive(t, sum.nacked, "the seed nacks some")
	require.Positive(t, sum.deferred, "ten accounts over four workers: records wait behind their accounts")
	require.Contains(t, out, "two workers held one account at once: never")

	// The state is kept in cfg.dir, and a second run over it is refused.
	_, err = runDemo(t.Context(), cfg, io.Discard)
	require.ErrorContains(t, err, "earlier run")
}

// TestQuarantineKeys runs the demo with -quarantine-keys: the poisoned operation takes its
// account's later operations into the quarantine, in order, none applied past it, and once
// the poison is fixed and requeued they are all applied in order.
func TestQuarantineKeys(t *testing.T) {
	cfg := smallConfig(t)
	cfg.quarantineKeys = true
	sum, out, err := runSmall(t, cfg)
	require.NoError(t, err)

	requireSound(t, sum, out)
	require.Equal(t, 400, sum.applied, "every operation, the poisoned one too once fixed")
	require.Zero(t, sum.wrongBalances, "the poisoned account's balance has the fixed operation")
	require.Greater(t, len(sum.keyOps), 1, "the plan puts operations after the poisoned one")
	require.True(t, sum.quarantinedAsExpected(), "quarantined: %v, expected: %v", sum.quarantined, sum.keyOps)
	require.Equal(t, len(sum.keyOps), sum.requeued)
	require.Equal(t, sum.requeued, sum.appliedAfterRequeue)
	require.Positive(t, sum.poisonFailures)
	require.Contains(t, out, "quarantining keys")
}

// runSmall runs the demo with cfg, logs its output and returns it with its summary.
func runSmall(t *testing.T, cfg config) (summary, string, error) {
	t.Helper()
	var out bytes.Buffer
	sum, err := runDemo(t.Context(), cfg, &out)
	t.Log("\n" + out.String())
	return sum, out.String(), err
}

// requireSound checks what every run of the small demo must show: every operation produced,
// applied in order, by one worker an account at a time, none lost, none overdrawn.
func requireSound(t *testing.T, sum summary, out string) {
	t.Helper()
	require.Equal(t, int64(400), sum.produced)
	require.True(t, sum.inOrder(), "operations applied out of order")
	require.Zero(t, sum.overlaps, "two workers held one account")
	require.Zero(t, sum.lost)
	require.Zero(t, sum.overdrafts)
	require.Contains(t, out, "every account's operations applied in order: yes")
	require.NotContains(t, out, "FAILED")
}

// TestKeysGoingOnIsCaught runs the -quarantine-keys demo over a topic that does not
// quarantine keys: the poisoned account goes on past it, and the checks must catch it.
func TestKeysGoingOnIsCaught(t *testing.T) {
	cfg := smallConfig(t)
	cfg.quarantineKeys, cfg.keysGoOn = true, true
	sum, out, err := runSmall(t, cfg)
	require.Error(t, err)
	require.False(t, sum.inOrder())
	require.Positive(t, sum.orderViolations)
	require.False(t, sum.quarantinedAsExpected(), "the poisoned operation went alone")
	require.Contains(t, out, "every account's operations applied in order: NO")
	require.Contains(t, out, "FAILED")
}

// TestUnorderedIsCaught runs the same demo over a topic that is not ordered: the checks must
// fail, or they could not fail at all.
func TestUnorderedIsCaught(t *testing.T) {
	cfg := smallConfig(t)
	cfg.unordered = true
	sum, out, err := runSmall(t, cfg)
	require.Error(t, err)
	// The poisoned operation's account goes on while it waits out its nacks: its later
	// operations are applied before it is quarantined.
	require.False(t, sum.inOrder())
	require.Positive(t, sum.orderViolations)
	require.Contains(t, out, "every account's operations applied in order: NO")
	require.Zero(t, sum.deferred, "nothing is deferred on a topic that is not ordered")
	t.Logf("two workers held one account at once %d times", sum.overlaps)
}

// TestLedgerChecks drives the ledger by hand through each violation it must catch, and what
// a correct queue may do that it must not count.
func TestLedgerChecks(t *testing.T) {
	now := time.Now()
	var offset int64
	deliver := func(account, seq int, fence uint64) delivery {
		offset++
		m := &router.Message{Partition: 0, Offset: offset, Expiry: now.Add(time.Second), Fence: fence, Attempt: 1}
		return delivery{msg: m, op: operation{account: account, seq: seq, amount: 10, currency: currency}}
	}
	l := newLedger(planOperations(10, 2, 1, 1), 3, false)

	// One holder at a time: a second worker receiving a held account is caught, a lapsed
	// hold and a released one are not.
	require.NoError(t, l.receive(1, []delivery{deliver(0, 1, 1), deliver(0, 2, 1)}, now))
	require.NoError(t, l.receive(2, []delivery{deliver(0, 3, 2)}, now))
	require.Equal(t, 1, l.overlaps)
	require.NoError(t, l.receive(3, []delivery{deliver(0, 3, 3)}, now.Add(2*time.Second)))
	require.Equal(t, 1, l.overlaps, "the holds had lapsed")
	l.release(1, 0)
	l.release(2, 0)
	l.release(3, 0)
	require.NoError(t, l.receive(4, []delivery{deliver(0, 3, 4)}, now))
	require.Equal(t, 1, l.overlaps)

	// In order, then a gap.
	for _, seq := range []int{1, 2} {
		o, err := l.apply(operation{account: 0, seq: seq, amount: 10}, uint64(10+seq))
		require.NoError(t, err)
		require.Equal(t, applied, o)
	}
	_, err := l.apply(operation{account: 0, seq: 4, amount: 10}, 20)
	require.NoError(t, err)
	require.Equal(t, 1, l.orderViolations)

	// Applied twice: by a stale lease (refused), after a failed ack (taken), after a
	// successful ack (caught).
	o, err := l.apply(operation{account: 0, seq: 2, amount: 10}, 5)
	require.NoError(t, err)
	require.Equal(t, stale, o)
	o, err = l.apply(operation{account: 0, seq: 2, amount: 10}, 30)
	require.NoError(t, err)
	require.Equal(t, appliedAlready, o)
	require.Zero(t, l.ackedDelivered)
	l.confirm(opRef{0, 2})
	_, err = l.apply(operation{account: 0, seq: 2, amount: 10}, 40)
	require.NoError(t, err)
	require.Equal(t, 1, l.ackedDelivered)

	// The poisoned operation: skipped once it failed MaxDeliveries times, not before.
	require.NoError(t, l.receive(5, []delivery{deliver(1, 1, 50), deliver(1, 2, 50), deliver(1, 3, 50)}, now))
	l.failed(opRef{1, 1}, 1)
	_, err = l.apply(operation{account: 1, seq: 2, amount: 10}, 51)
	require.NoError(t, err)
	require.Equal(t, 2, l.orderViolations, "applied past an operation still being retried")
	l.failed(opRef{1, 1}, 3)
	_, err = l.apply(operation{account: 1, seq: 3, amount: 10}, 52)
	require.NoError(t, err)
	require.Equal(t, 2, l.orderViolations, "past the quarantined one: the stated exception")
	l.failed(opRef{1, 1}, 4)
	require.Equal(t, 1, l.lateDeliveries, "delivered past MaxDeliveries")

	// Overdrawn: a withdrawal larger than the balance.
	_, err = l.apply(operation{account: 1, seq: 4, amount: -1000}, 53)
	require.NoError(t, err)
	require.Equal(t, 1, l.overdrafts)

	// Under QuarantineKeys there is no exception: past the quarantined operation is out of
	// order too.
	l = newLedger(planOperations(10, 2, 1, 1), 3, true)
	require.NoError(t, l.receive(1, []delivery{deliver(0, 1, 60), deliver(0, 2, 60)}, now))
	l.failed(opRef{0, 1}, 3)
	_, err = l.apply(operation{account: 0, seq: 2, amount: 10}, 61)
	require.NoError(t, err)
	require.Equal(t, 1, l.orderViolations, "applied past the quarantined operation of a quarantined key")
}

// TestLedgerSettles checks when the ledger says every operation is settled: acked or
// quarantined, and once the quarantine is requeued, acked.
func TestLedgerSettles(t *testing.T) {
	p := planOperations(3, 1, 1, 1)
	l := newLedger(p, 3, true)
	settled := func() bool {
		select {
		case <-l.settled():
			return true
		default:
			return false
		}
	}
	for seq := 1; seq <= 3; seq++ {
		_, err := l.apply(operation{account: 0, seq: seq, amount: 10}, 1)
		require.NoError(t, err)
	}
	l.confirm(opRef{0, 1})
	require.False(t, settled())
	l.quarantine(p.positions[1].partition, p.positions[1].offset, 3)
	require.False(t, settled())
	l.quarantine(p.positions[2].partition, p.positions[2].offset, 0)
	require.True(t, settled(), "one acked, two quarantined")
	require.Equal(t, []quarantine{{position: p.positions[1], attempts: 3, op: opRef{0, 2}}, {position: p.positions[2], op: opRef{0, 3}}},
		l.quarantined, "named by the plan, delivered or not")

	l.requeue(2)
	require.False(t, settled(), "the requeued ones are to be acked")
	l.confirm(opRef{0, 2})
	require.False(t, settled())
	l.confirm(opRef{0, 3})
	require.True(t, settled())
}

// TestQuarantineExpected checks what the summary takes for the quarantine it expects: under
// QuarantineKeys the poisoned operation after MaxDeliveries, then its account's later
// operations in offset order, only those its last batch held being allowed to come late.
func TestQuarantineExpected(t *testing.T) {
	poisoned := opRef{3, 5}
	keyOps := []opRef{poisoned, {3, 6}, {3, 7}, {3, 8}}
	q := func(seq int, offset int64, attempts uint32, batch uint64) quarantine {
		return quarantine{position: position{1, offset}, attempts: attempts, op: opRef{3, seq}, batch: batch}
	}
	for _, tc := range []struct {
		name        string
		quarantined []quarantine
		ok          bool
	}{
		{"in order", []quarantine{q(5, 10, 5, 7), q(6, 12, 0, 0), q(7, 15, 0, 0), q(8, 20, 0, 0)}, true},
		{"its last batch's given back late", []quarantine{q(5, 10, 5, 7), q(7, 15, 0, 0), q(8, 20, 0, 0), q(6, 12, 0, 7)}, true},
		{"given back before, late", []quarantine{q(5, 10, 5, 7), q(7, 15, 0, 0), q(8, 20, 0, 0), q(6, 12, 0, 4)}, false},
		{"never delivered, late", []quarantine{q(5, 10, 5, 7), q(7, 15, 0, 0), q(6, 12, 0, 0), q(8, 20, 0, 0)}, false},
		{"the poisoned one not first", []quarantine{q(6, 12, 0, 0), q(5, 10, 5, 7), q(7, 15, 0, 0), q(8, 20, 0, 0)}, false},
		{"before MaxDeliveries", []quarantine{q(5, 10, 4, 7), q(6, 12, 0, 0), q(7, 15, 0, 0), q(8, 20, 0, 0)}, false},
		{"one missing", []quarantine{q(5, 10, 5, 7), q(6, 12, 0, 0), q(8, 20, 0, 0)}, false},
		{"one twice", []quarantine{q(5, 10, 5, 7), q(6, 12, 0, 0), q(6, 12, 0, 0), q(8, 20, 0, 0)}, false},
		{"none", nil, false},
	} {
		s := summary{quarantineKeys: true, poisoned: poisoned, keyOps: keyOps, quarantined: tc.quarantined}
		require.Equal(t, tc.ok, s.quarantinedAsExpected(), tc.name)
	}
	// Without QuarantineKeys the poisoned operation goes alone.
	alone := summary{poisoned: poisoned, keyOps: []opRef{poisoned}, quarantined: []quarantine{q(5, 10, 5, 7)}}
	require.True(t, alone.quarantinedAsExpected())
	alone.quarantined = append(alone.quarantined, q(6, 12, 0, 0))
	require.False(t, alone.quarantinedAsExpected())
}

func TestPlan(t *testing.T) {
	p := planOperations(2000, 50, 4, 7)
	offsets := make([]int64, 4)
	poisoned := p.ops[p.poisoned]
	require.Equal(t, poisonCurrency, poisoned.currency)
	require.Less(t, poisoned.seq, p.counts[poisoned.account], "the poisoned account goes on after it")
	balances := make([]int64, 50)
	for i, op := range p.ops {
		key := accountKey(nil, op.account)
		part := partitionOf(key, 4)
		require.Equal(t, position{part, offsets[part]}, p.positions[i], "appended to its account's partition, in order")
		offsets[part]++
		if i == p.poisoned {
			continue
		}
		balances[op.account] += op.amount
		require.GreaterOrEqual(t, balances[op.account], int64(0), "in order, no withdrawal overdraws")
		got, err := decodeOperation(key, op.encode(nil))
		require.NoError(t, err)
		require.Equal(t, op, got)
		require.Equal(t, part, partitionOf([]byte(accountName(op.account)), 4))
	}
	require.Equal(t, p.balances, balances)
	_, err := decodeOperation([]byte("order-1"), []byte("seq=1 amount=1 currency=EUR"))
	require.Error(t, err)
}

func TestFlags(t *testing.T) {
	var errOut bytes.Buffer
	cfg, err := parseFlags(nil, &errOut)
	require.NoError(t, err)
	require.Equal(t, 20_000, cfg.messages)
	require.Equal(t, 200, cfg.accounts)
	require.Equal(t, 8, cfg.workers)
	require.False(t, cfg.unordered)
	require.False(t, cfg.quarantineKeys)
	cfg, err = parseFlags([]string{"-quarantine-keys"}, &errOut)
	require.NoError(t, err)
	require.True(t, cfg.quarantineKeys)

	_, err = parseFlags([]string{"-h"}, &errOut)
	require.Error(t, err)
	require.Contains(t, errOut.String(), "-accounts")

	for _, bad := range [][]string{{"-messages", "0"}, {"-accounts", "0"}, {"-rate", "-1"}, {"extra"}, {"-visibility", "0s"}} {
		_, err = parseFlags(bad, &errOut)
		require.Error(t, err, strings.Join(bad, " "))
	}
}
