package router_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
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

	fmt.Println(node.Ack(ctx, "orders", m.Receipt))
	err = node.Ack(ctx, "orders", m.Receipt)
	fmt.Println(errors.Is(err, router.ErrAlreadySettled), router.HTTPStatus(err))

	off = log.Append([]byte("k"), []byte("second order"), time.Now())
	node.Appended("orders", 0, off+1)
	msgs, _ = node.Consume(ctx, "orders", router.ConsumeOptions{})
	forged := msgs[0].Receipt
	forged.Nonce++ // a handle nobody was given
	_, err = node.Extend(ctx, "orders", forged, time.Minute)
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

// AckAsync acks without waiting: a consumer hands each handle over and goes on, and done
// gets what Ack would have answered. Here node b forwards the acks of node a's partition,
// sharing RPCs between them.
func ExampleNode_AckAsync() {
	logs := &routertest.MemLogs{}
	log := logs.Log("orders", 0)
	network := &routertest.Network{}
	var dirs []string
	defer func() {
		for _, dir := range dirs {
			os.RemoveAll(dir)
		}
	}()
	start := func(id string, routes *routertest.Routes) *router.Node {
		dir, _ := os.MkdirTemp("", "consume-example")
		dirs = append(dirs, dir)
		node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: dir, Transport: network.Transport(id)})
		if err != nil {
			panic(err)
		}
		network.Join(id, node.Serve)
		return node
	}
	routesA, routesB := &routertest.Routes{}, &routertest.Routes{}
	routesA.Set("orders", 0)
	routesB.SetRemote("orders", "a", 0)
	a, b := start("a", routesA), start("b", routesB)
	defer a.Close()

	for range 100 {
		off := log.Append(nil, []byte("order"), time.Now())
		a.Appended("orders", 0, off+1)
	}
	msgs, _ := a.Consume(context.Background(), "orders", router.ConsumeOptions{Max: 100})

	var failed atomic.Int64
	for _, m := range msgs {
		b.AckAsync("orders", m.Receipt, func(err error) {
			if err != nil {
				failed.Add(1)
			}
		})
	}
	b.Close() // waits until every done has returned
	fmt.Printf("%d acked through b, %d failed; the owner applied %d\n", len(msgs), failed.Load(), a.Stats().Shards.Acked)
	// Output:
	// 100 acked through b, 0 failed; the owner applied 100
}
