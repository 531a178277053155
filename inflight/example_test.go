package inflight_test

import (
	"errors"
	"fmt"
	"time"

	"narad.dev/consume/inflight"
)

// A shard leases the lowest unresolved offset, settles acks out of order and advances the
// frontier over the contiguous settled run.
func Example() {
	now := time.Unix(1_700_000_000, 0)
	shard := inflight.NewShard("orders", 0, inflight.Options{}, inflight.State{Frontier: -1})
	const hwm = 3 // the log holds offsets 0, 1 and 2

	first, _ := shard.ReserveNext(now, hwm)
	second, _ := shard.ReserveNext(now, hwm)
	fmt.Println("leased", first.Offset, second.Offset, "attempt", first.Attempt)

	_ = shard.Ack(now, second.Handle) // out of order: parked acked ahead
	fmt.Println("frontier", shard.Stats().Frontier, "acked ahead", shard.Stats().AckedAhead)
	_ = shard.Ack(now, first.Handle) // closes the gap
	fmt.Println("frontier", shard.Stats().Frontier)

	err := shard.Ack(now, first.Handle)
	fmt.Println("again:", errors.Is(err, inflight.ErrAlreadySettled))

	third, _ := shard.ReserveNext(now, hwm)
	late := now.Add(inflight.DefaultVisibilityTimeout) // its consumer died
	fmt.Println("late ack:", errors.Is(shard.Ack(late, third.Handle), inflight.ErrGone))
	// Output:
	// leased 0 1 attempt 1
	// frontier -1 acked ahead 1
	// frontier 1
	// again: true
	// late ack: true
}

// ParseHandle accepts exactly the text form of a Handle and refuses anything else with
// ErrMalformedHandle.
func ExampleParseHandle() {
	h, err := inflight.ParseHandle("3:42:9876543210")
	fmt.Println(h.Partition, h.Offset, h.Nonce, err)
	_, err = inflight.ParseHandle("3:042:1")
	fmt.Println(errors.Is(err, inflight.ErrMalformedHandle))
	// Output:
	// 3 42 9876543210 <nil>
	// true
}
