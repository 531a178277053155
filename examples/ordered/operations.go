package main

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"narad.dev/consume/examples/filelog"
)

// An operation is a deposit (a positive amount) or a withdrawal (a negative one) on an
// account, the seq-th of that account (from 1).
type operation struct {
	account  int
	seq      int
	amount   int64
	currency string
}

const (
	currency = "EUR"
	// poisonCurrency is the poisoned operation's: the ledger has no rate for it, fails it
	// every time, and takes that for a transient failure (a rate service that is down), as
	// handlers often do.
	poisonCurrency = "XTS"
)

// A plan is what the producer appends, in this order, and what the ledger should end with.
type plan struct {
	ops       []operation
	positions []position // of each operation in the log: the producer appends to empty partitions
	poisoned  int        // index in ops of the operation that always fails
	counts    []int      // operations per account
	balances  []int64    // per account, once every operation but the poisoned one is applied
}

// planOperations draws n operations on the given number of accounts. The poisoned one is a
// deposit a third of the way in, on an account with operations after it, so that the account
// is seen to go on past it. The withdrawals are drawn against the balance without it, so that
// no account is ever overdrawn when its operations are applied in order.
func planOperations(n, accounts, partitions int, seed uint64) plan {
	rng := rand.New(rand.NewPCG(seed, 0x6f726465726564))
	p := plan{
		ops: make([]operation, n), positions: make([]position, n),
		counts: make([]int, accounts), balances: make([]int64, accounts),
	}
	next := make([]int64, partitions) // the next offset of each partition
	for i := range p.ops {
		a := rng.IntN(accounts)
		p.counts[a]++
		p.ops[i] = operation{account: a, seq: p.counts[a], currency: currency}
		part := partitionOf(accountKey(nil, a), partitions)
		p.positions[i] = position{part, next[part]}
		next[part]++
	}
	p.poisoned = n / 3
	for i := n / 3; i < n; i++ {
		if op := p.ops[i]; op.seq < p.counts[op.account] {
			p.poisoned = i
			break
		}
	}
	for i := range p.ops {
		op := &p.ops[i]
		if i == p.poisoned {
			op.amount, op.currency = 100, poisonCurrency
			continue
		}
		if b := p.balances[op.account]; b > 0 && rng.IntN(2) == 0 {
			op.amount = -(1 + rng.Int64N(b))
		} else {
			op.amount = 1 + rng.Int64N(500)
		}
		p.balances[op.account] += op.amount
	}
	return p
}

// accountKey is a record's key: its account.
func accountKey(dst []byte, account int) []byte { return fmt.Appendf(dst, "acct-%04d", account) }

// parseAccount is accountKey's inverse.
func parseAccount(key []byte) (int, error) {
	s, ok := strings.CutPrefix(string(key), "acct-")
	a, err := strconv.Atoi(s)
	if !ok || err != nil || a < 0 {
		return 0, fmt.Errorf("a record keyed %q, not an account", key)
	}
	return a, nil
}

func accountName(account int) string { return string(accountKey(nil, account)) }

// encode is a record's value.
func (op operation) encode(dst []byte) []byte {
	return fmt.Appendf(dst, "seq=%d amount=%d currency=%s", op.seq, op.amount, op.currency)
}

// decodeOperation reads a record: its key and value.
func decodeOperation(key, value []byte) (operation, error) {
	a, err := parseAccount(key)
	if err != nil {
		return operation{}, err
	}
	op := operation{account: a}
	if _, err := fmt.Sscanf(string(value), "seq=%d amount=%d currency=%s", &op.seq, &op.amount, &op.currency); err != nil || op.seq < 1 {
		return operation{}, fmt.Errorf("record %q of %s is not an operation", value, key)
	}
	return op, nil
}

// partitionOf is the partition of a key, as a producer picks it: a hash of the key, so that
// all the operations of an account go to one partition, where its order is kept.
func partitionOf(key []byte, partitions int) int32 {
	h := fnv.New32a()
	h.Write(key)
	return int32(h.Sum32() % uint32(partitions))
}

// produce appends the plan's operations at rate per second (in bursts every 10 ms), or as
// fast as it can when rate is 0, each at the position the plan gives it.
func produce(ctx context.Context, store *filelog.Store, p plan, rate int, st *stats) error {
	var tick <-chan time.Time
	burst := len(p.ops)
	if rate > 0 {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		tick, burst = t.C, max(1, rate/100)
	}
	var key, value []byte
	for i := 0; i < len(p.ops); {
		if tick != nil {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-tick:
			}
		}
		for end := min(i+burst, len(p.ops)); i < end; i++ {
			op := p.ops[i]
			key = accountKey(key[:0], op.account)
			value = op.encode(value[:0])
			// The store's OnAppend wakes a parked consumer.
			pos := p.positions[i]
			off, err := store.Append(topic, pos.partition, key, value)
			if err != nil {
				return fmt.Errorf("produce: %w", err)
			}
			if off != pos.offset {
				return fmt.Errorf("produce: %v appended at offset %d of partition %d, not the plan's %d", opRef{op.account, op.seq}, off, pos.partition, pos.offset)
			}
			st.produced.Add(1)
		}
	}
	return nil
}
