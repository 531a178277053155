package crashfs_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// An *FS is what a node takes as its file system, with every optional capability it looks for.
var (
	_ router.FS         = (*crashfs.FS)(nil)
	_ router.DirLocker  = (*crashfs.FS)(nil)
	_ router.TreeSyncer = (*crashfs.FS)(nil)
	_ router.Renamer    = (*crashfs.FS)(nil)
)

// hostFS stands for a host's own wrapper of the file system it gives its nodes (one that
// places partitions on several disks, encrypts, or counts, as this one does). Embedding the
// *crashfs.FS keeps the optional capabilities the node finds by type assertion.
type hostFS struct {
	*crashfs.FS
	roots atomic.Int64
}

func (h *hostFS) OpenRoot(dir string) (router.Root, error) {
	h.roots.Add(1)
	return h.FS.OpenRoot(dir)
}

// A host runs a node over its own FS wrapper on a crashfs.FS, cuts the power under it, starts
// a node again over what survived, and checks that no durable ack came back.
func Example_powerCutUnderANode() {
	ctx := context.Background()
	logs, routes := &routertest.MemLogs{}, &routertest.Routes{}
	routes.Set("orders", 0)
	for i := range 5 {
		logs.Log("orders", 0).Append(nil, fmt.Appendf(nil, "order %d", i), time.Now())
	}
	mem := crashfs.New()
	start := func(fsys router.FS) *router.Node {
		node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: fsys})
		if err != nil {
			panic(err)
		}
		return node
	}

	host := &hostFS{FS: mem}
	node := start(host)
	msgs, _ := node.Consume(ctx, "orders", router.ConsumeOptions{Max: 5})
	for _, m := range msgs[:3] {
		if err := node.AckDurable(ctx, "orders", m.Receipt); err != nil { // on disk when it returns
			panic(err)
		}
	}

	// The power goes: the new FS holds what was synced. The old one is frozen, so the old
	// node can change nothing of it any more: what it still writes fails with ErrCrashed.
	after := mem.PowerCut(crashfs.PowerCut{})
	err := node.Close() // it persists its acks as it closes, and cannot
	fmt.Println("the old node's Close:", errors.Is(err, crashfs.ErrCrashed))

	node = start(&hostFS{FS: after})
	defer node.Close()
	msgs, _ = node.Consume(ctx, "orders", router.ConsumeOptions{Max: 5})
	var again []int64
	for _, m := range msgs {
		again = append(again, m.Offset)
	}
	fmt.Println("the node opened its partition's directory through the wrapper:", host.roots.Load() > 0)
	fmt.Println("delivered after the power cut:", again)
	// Output:
	// the old node's Close: true
	// the node opened its partition's directory through the wrapper: true
	// delivered after the power cut: [3 4]
}
