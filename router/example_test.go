package router_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// A node over a host's log: consume with a long-poll, ack, and see a stale handle refused.
func Example() {
	dir, _ := os.MkdirTemp("", "consume-example")
	defer os.RemoveAll(dir)
	logs := &routertest.MemLogs{} // stands in for the host's log
	routes := &routertest.Routes{}
	routes.Set("orders", 0)
	log := logs.Log("orders", 0)

	node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: dir})
	if err != nil {
		panic(err)
	}
	defer node.Close()

	off := log.Append([]byte("k"), []byte("first order"), time.Now())
	node.Appended("orders", 0, off+1) // the host's produce path

	ctx := context.Background()
	msgs, _ := node.Consume(ctx, "orders", router.ConsumeOptions{Max: 10, Wait: time.Second})
	m := msgs[0]
	fmt.Printf("%s at %d/%d, attempt %d\n", m.Value, m.Partition, m.Offset, m.Attempt)

	fmt.Println(node.Ack(ctx, "orders", m.Receipt.String()))
	err = node.Ack(ctx, "orders", m.Receipt.String())
	fmt.Println(errors.Is(err, router.ErrAlreadySettled), router.HTTPStatus(err))

	off = log.Append([]byte("k"), []byte("second order"), time.Now())
	node.Appended("orders", 0, off+1)
	msgs, _ = node.Consume(ctx, "orders", router.ConsumeOptions{})
	forged := msgs[0].Receipt
	forged.Nonce++ // a handle nobody was given
	_, err = node.Extend(ctx, "orders", forged.String(), time.Minute)
	fmt.Println(errors.Is(err, router.ErrGone), router.HTTPStatus(err))
	// Output:
	// first order at 0/0, attempt 1
	// <nil>
	// true 410
	// true 410
}

// Work runs a handler per record, acking what it returns nil for.
func ExampleNode_Work() {
	dir, _ := os.MkdirTemp("", "consume-example")
	defer os.RemoveAll(dir)
	logs := &routertest.MemLogs{}
	routes := &routertest.Routes{}
	routes.Set("orders", 0)
	node, _ := router.New(router.Config{Logs: logs, Routes: routes, Dir: dir})
	defer node.Close()
	for _, v := range []string{"a", "b", "c"} {
		off := logs.Log("orders", 0).Append(nil, []byte(v), time.Now())
		node.Appended("orders", 0, off+1)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	seen := 0
	go func() {
		defer close(done)
		node.Work(ctx, "orders", func(ctx context.Context, m router.Message) error {
			fmt.Println("processed", string(m.Value))
			if seen++; seen == 3 {
				cancel()
			}
			return nil
		}, router.WorkOptions{})
	}()
	<-done
	// Output:
	// processed a
	// processed b
	// processed c
}
