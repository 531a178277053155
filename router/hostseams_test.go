package router_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// hostileHost answers as routertest's logs and routes do until it is armed; then its case
// makes it answer wrongly about one partition of "orders" (or about the topic's routes).
// Every other partition and topic stays healthy.
type hostileHost struct {
	logs   *routertest.MemLogs
	routes *routertest.Routes
	c      *hostileCase
	armed  atomic.Bool
	local  []int32            // the armed routes of "orders", fixed at arm: one answer
	remote map[string][]int32 // (the node judges an answer once)
}

// hostileCase is one wrong answer, and what each call naming the broken partition answers
// once the host is armed: ErrHostContract where a field of want is set, anything else (but
// never a panic) where it is not.
type hostileCase struct {
	name   string
	broken int32 // the partition answered wrongly about
	// Each hook, when set, replaces the healthy answer for the broken partition.
	get      func() (router.Log, error)
	getMany  func(partitions []int32, into []router.Log, broken int32)
	wrap     func(real *routertest.MemLog) router.Log
	routes   func() (local []int32, remote map[string][]int32)
	owner    func(partition int32) (string, bool)
	crossing bool // the node has a Transport (for the cases about other nodes' partitions)
	want     struct {
		pinned bool // a pinned consume (a batch) of the broken partition
		parked bool // a consumer parked on it before the host broke, woken by Appended
		replay bool
		status bool // its PartitionStatus's Err (TopicStatus's entry for it)
		ack    bool // an ack naming it, on a node that has not loaded it
	}
}

func (h *hostileHost) hits(topic string, partition int32) bool {
	return h.armed.Load() && topic == "orders" && partition == h.c.broken
}

func (h *hostileHost) Get(topic string, partition int32) (router.Log, error) {
	if h.hits(topic, partition) && h.c.get != nil {
		return h.c.get()
	}
	log, err := h.logs.Get(topic, partition)
	if err == nil && h.hits(topic, partition) && h.c.wrap != nil {
		return h.c.wrap(log.(*routertest.MemLog)), nil
	}
	return log, err
}

func (h *hostileHost) GetMany(topic string, partitions []int32, into []router.Log) error {
	if err := h.logs.GetMany(topic, partitions, into); err != nil {
		return err
	}
	for i, p := range partitions {
		if h.hits(topic, p) && h.c.wrap != nil {
			into[i] = h.c.wrap(into[i].(*routertest.MemLog))
		}
	}
	if h.armed.Load() && topic == "orders" && h.c.getMany != nil {
		h.c.getMany(partitions, into, h.c.broken)
	}
	return nil
}

func (h *hostileHost) Partitions(topic string) ([]int32, map[string][]int32, bool) {
	if h.armed.Load() && topic == "orders" && h.local != nil {
		return h.local, h.remote, true
	}
	return h.routes.Partitions(topic)
}

func (h *hostileHost) Owner(topic string, partition int32) (string, bool) {
	if h.hits(topic, partition) && h.c.owner != nil {
		return h.c.owner(partition)
	}
	return h.routes.Owner(topic, partition)
}

func (h *hostileHost) arm() {
	if h.c.routes != nil {
		h.local, h.remote = h.c.routes()
	}
	h.armed.Store(true)
}

// lyingLog is a MemLog whose watermarks or reads a case overrides. It offers no
// RangeReader, so that every read goes through Read.
type lyingLog struct {
	real   *routertest.MemLog
	hwm    func(real int64) int64
	oldest func(real int64) int64
	read   func(offset int64) (router.Record, error)
}

func (l *lyingLog) HighWatermark() int64 {
	if l.hwm != nil {
		return l.hwm(l.real.HighWatermark())
	}
	return l.real.HighWatermark()
}

func (l *lyingLog) Oldest() int64 {
	if l.oldest != nil {
		return l.oldest(l.real.Oldest())
	}
	return l.real.Oldest()
}

func (l *lyingLog) Read(offset int64) (router.Record, error) {
	if l.read != nil {
		return l.read(offset)
	}
	return l.real.Read(offset)
}

// overlongRangeLog is a MemLog whose ReadRange returns more records than it was asked for.
type overlongRangeLog struct{ *routertest.MemLog }

func (l overlongRangeLog) ReadRange(offset int64, limit, maxBytes int, dst []router.Record) ([]router.Record, error) {
	dst, err := l.MemLog.ReadRange(offset, limit, maxBytes, dst)
	for range 3 {
		dst = append(dst, router.Record{Value: []byte("not asked for")})
	}
	return dst, err
}

func notFound(int64) (router.Record, error) { return router.Record{}, router.ErrNotFound }

var hostileCases = []hostileCase{
	{
		name: "Logs.Get returns a nil Log and no error", broken: 1,
		get:  func() (router.Log, error) { return nil, nil },
		want: wants(true, true, true, true, true),
	},
	{
		name: "Logs.GetMany leaves a Log nil and returns no error", broken: 1,
		getMany: func(partitions []int32, into []router.Log, broken int32) {
			if i := slices.Index(partitions, broken); i >= 0 {
				into[i] = nil
			}
		},
	},
	{
		name: "Logs.GetMany fills fewer entries than asked", broken: 1,
		getMany: func(partitions []int32, into []router.Log, _ int32) {
			into[len(into)-1] = nil
		},
	},
	{
		name: "Log.HighWatermark is negative", broken: 1,
		wrap: func(real *routertest.MemLog) router.Log {
			return &lyingLog{real: real, hwm: func(int64) int64 { return -3 }}
		},
		want: wants(true, true, true, true, true),
	},
	{
		// Read where the node reads both watermarks: a load, a replay, a status.
		name: "Log.HighWatermark is below Log.Oldest", broken: 1,
		wrap: func(real *routertest.MemLog) router.Log {
			return &lyingLog{real: real, oldest: func(int64) int64 { return real.HighWatermark() + 3 }}
		},
		want: wants(false, false, true, true, true),
	},
	{
		name: "Log.Oldest is negative", broken: 1,
		wrap: func(real *routertest.MemLog) router.Log {
			return &lyingLog{real: real, oldest: func(int64) int64 { return -4 }}
		},
		want: wants(false, false, true, true, true),
	},
	{
		// A retention miss at a retained offset: given back and reserved again, forever,
		// if the node believed it.
		name: "Log.Read answers ErrNotFound at an offset Oldest says is retained", broken: 1,
		wrap: func(real *routertest.MemLog) router.Log { return &lyingLog{real: real, read: notFound} },
		want: wants(true, true, false, false, false),
	},
	{
		// A jump there would pass over every record not written yet, and persist it.
		name: "Log.Read answers ErrNotFound with Oldest past the high watermark", broken: 1,
		wrap: func(real *routertest.MemLog) router.Log {
			return &lyingLog{real: real, read: notFound, oldest: func(int64) int64 { return 1 << 40 }}
		},
		want: wants(true, true, true, true, true),
	},
	{
		name: "RangeReader.ReadRange returns more records than asked", broken: 1,
		wrap: func(real *routertest.MemLog) router.Log { return overlongRangeLog{real} },
		want: wants(true, false, false, false, false),
	},
	{
		name: "Routes.Partitions names a local partition twice", broken: 1,
		routes: func() ([]int32, map[string][]int32) { return []int32{0, 1, 2, 1}, nil },
		want:   wants(true, true, true, true, true),
	},
	{
		name: "Routes.Partitions names a partition both here and on another node", broken: 1,
		routes: func() ([]int32, map[string][]int32) { return []int32{0, 1, 2}, map[string][]int32{"b": {1}} },
		want:   wants(true, true, true, true, true),
	},
	{
		name: "Routes.Partitions names a negative partition", broken: -7,
		routes: func() ([]int32, map[string][]int32) { return []int32{0, 1, 2, -7}, nil },
		want:   wants(false, false, false, true, false),
	},
	{
		name: "Routes.Partitions names a partition on two other nodes", broken: 5, crossing: true,
		routes: func() ([]int32, map[string][]int32) {
			return []int32{0, 1, 2}, map[string][]int32{"b": {5}, "c": {5}}
		},
		want: wants(true, false, true, false, true),
	},
	{
		name: "Routes.Partitions names an owner \"\"", broken: 5, crossing: true,
		routes: func() ([]int32, map[string][]int32) { return []int32{0, 1, 2}, map[string][]int32{"": {5}} },
		want:   wants(true, false, true, false, true),
	},
	{
		name: "OwnerFinder.Owner names an owner \"\"", broken: 5, crossing: true,
		routes: func() ([]int32, map[string][]int32) { return []int32{0, 1, 2}, map[string][]int32{"b": {5}} },
		owner:  func(int32) (string, bool) { return "", true },
		want:   wants(false, false, false, false, true),
	},
}

func wants(pinned, parked, replay, status, ack bool) (w struct{ pinned, parked, replay, status, ack bool }) {
	w.pinned, w.parked, w.replay, w.status, w.ack = pinned, parked, replay, status, ack
	return w
}

// hostileHarness is a node over a hostileHost: "orders" with partitions 0, 1 and 2 here,
// "other" with partition 0.
type hostileHarness struct {
	t    *testing.T
	host *hostileHost
	cfg  router.Config
	node *router.Node
}

func newHostileHarness(t *testing.T, c *hostileCase) *hostileHarness {
	host := &hostileHost{logs: &routertest.MemLogs{}, routes: &routertest.Routes{}, c: c}
	host.routes.Set("orders", 0, 1, 2)
	host.routes.Set("other", 0)
	for _, p := range []int32{0, 1, 2} {
		host.logs.Log("orders", p)
	}
	host.logs.Log("other", 0)
	h := &hostileHarness{t: t, host: host, cfg: router.Config{Logs: host, Routes: host, Dir: "/state", FS: crashfs.New(),
		Logger: slog.New(slog.DiscardHandler)}}
	if c.crossing {
		nw := &routertest.Network{RTT: time.Millisecond}
		h.cfg.Transport = nw.Transport("a") // nobody else joins: every peer is unreachable
	}
	h.start()
	return h
}

func (h *hostileHarness) start() {
	node, err := router.New(h.cfg)
	require.NoError(h.t, err)
	h.node = node
}

func (h *hostileHarness) restart() {
	require.NoError(h.t, h.node.Close())
	h.start()
}

func (h *hostileHarness) produce(topic string, p int32, n int) {
	log := h.host.logs.Log(topic, p)
	for range n {
		off := log.Append(nil, []byte("v"), time.Now())
		h.node.Appended(topic, p, off+1)
	}
}

func (h *hostileHarness) consumeAsync(topic string, opts router.ConsumeOptions) <-chan consumed {
	return goConsume(context.Background(), h.node, topic, opts)
}

func (h *hostileHarness) ackAll(msgs []router.Message) {
	for _, m := range msgs {
		require.NoError(h.t, h.node.Ack(context.Background(), m.Topic, m.Receipt), "ack %s/%d@%d", m.Topic, m.Partition, m.Offset)
	}
}

func mustReturn(t *testing.T, ch <-chan consumed, what string) consumed {
	t.Helper()
	r, ok := returned(ch)
	if !ok {
		t.Fatalf("%s: still parked", what)
	}
	return r
}

// wantContract asserts that err wraps ErrHostContract when want is set, and does not when it
// is not.
func wantContract(t *testing.T, want bool, err error, what string) {
	t.Helper()
	if want {
		assert.ErrorIs(t, err, router.ErrHostContract, what)
		assert.Equal(t, 500, router.HTTPStatus(err), what)
	} else {
		assert.NotErrorIs(t, err, router.ErrHostContract, what)
	}
}

// TestHostileSeams: each wrong answer a host's seam can give is refused where it enters the
// node, with an error wrapping ErrHostContract, and costs nothing else: no panic, no dead
// pump, no frontier moved on its word; the topic's healthy partitions and the other topic go
// on serving, long-polls included, over the public API.
func TestHostileSeams(t *testing.T) {
	for i := range hostileCases {
		c := &hostileCases[i]
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { exerciseHostileSeam(t, c) })
		})
	}
}

func exerciseHostileSeam(t *testing.T, c *hostileCase) {
	h := newHostileHarness(t, c)
	defer func() { require.NoError(t, h.node.Close()) }()
	ctx := context.Background()
	brokenHere := c.broken >= 0 && c.broken <= 2
	h.produce("orders", 0, 4)
	h.produce("orders", 2, 4)
	h.produce("other", 0, 2)

	// A consumer parks on the broken partition while it is healthy (and empty); it breaks,
	// records arrive, and Appended wakes the pump, which reserves for the consumer.
	var parked <-chan consumed
	if brokenHere {
		parked = h.consumeAsync("orders", router.ConsumeOptions{Pinned: true, Partition: c.broken, Wait: time.Hour})
		synctest.Wait()
		require.Equal(t, 1, h.node.Parked("orders"))
	}
	h.host.arm()
	h.produce("orders", 1, 4)
	synctest.Wait()
	if parked != nil {
		r := mustReturn(t, parked, "the consumer parked on the broken partition")
		wantContract(t, c.want.parked, r.err, "the parked consumer")
		h.ackAll(r.msgs)
	}

	// Unpinned consumes, single and batched, are served by the healthy partitions: no
	// error, whatever the broken one does.
	left := map[int32]int{0: 4, 2: 4}
	for i := 0; i < 40 && left[0]+left[2] > 0; i++ {
		msgs, err := h.node.Consume(ctx, "orders", router.ConsumeOptions{Max: 1 + 4*(i%2)})
		require.NoError(t, err, "unpinned consume %d", i)
		for _, m := range msgs {
			left[m.Partition]--
		}
		h.ackAll(msgs)
	}
	assert.Zero(t, left[0]+left[2], "every record of the healthy partitions delivered")
	// Scans that start at an empty partition resolve the rest at once (GetMany); the
	// rotation starts each at the next partition, so one of three does.
	for i := range 3 {
		msgs, err := h.node.Consume(ctx, "orders", router.ConsumeOptions{})
		if c.crossing && errors.Is(err, router.ErrTransport) {
			err = nil // nothing here, and the other nodes are unreachable
		}
		require.NoError(t, err, "unpinned consume over the drained partitions %d", i)
		h.ackAll(msgs)
	}

	// A long-poll parks on what is left, sits through an append to the broken partition,
	// and is served by one to a healthy partition.
	poll := h.consumeAsync("orders", router.ConsumeOptions{Wait: time.Hour})
	synctest.Wait()
	h.produce("orders", 1, 1)
	synctest.Wait()
	h.produce("orders", 0, 1)
	synctest.Wait()
	r := mustReturn(t, poll, "the unpinned long-poll")
	require.NoError(t, r.err)
	require.NotEmpty(t, r.msgs)
	h.ackAll(r.msgs)

	if brokenHere {
		h.produce("orders", c.broken, 3) // a range to read, whatever was delivered of it
	}
	if c.broken >= 0 {
		_, err := h.node.Consume(ctx, "orders", router.ConsumeOptions{Pinned: true, Partition: c.broken, Max: 10})
		wantContract(t, c.want.pinned, err, "a pinned consume")
		_, err = h.node.Replay(ctx, "orders", c.broken, 0, 10)
		wantContract(t, c.want.replay, err, "a replay")
	}
	statuses, err := h.node.TopicStatus("orders")
	require.NoError(t, err)
	for _, st := range statuses {
		if st.Partition == c.broken {
			wantContract(t, c.want.status, st.Err, "the status")
		} else {
			assert.NoError(t, st.Err, "the status of partition %d", st.Partition)
		}
		if st.Loaded && st.Partition == 1 {
			real := h.host.logs.Log("orders", 1).HighWatermark()
			assert.Less(t, st.Frontier, real, "the frontier passed records never written")
		}
	}

	// The other topic never noticed.
	msgs, err := h.node.Consume(ctx, "other", router.ConsumeOptions{Max: 10})
	require.NoError(t, err)
	assert.Len(t, msgs, 2)
	h.ackAll(msgs)
	replayed, err := h.node.Replay(ctx, "orders", 0, 0, 10)
	require.NoError(t, err)
	assert.Len(t, replayed, 5)
	counted := h.node.Stats().HostContractViolations

	// An ack naming the broken partition, on a node that has not loaded it yet: it answers
	// the error, or whatever it would have (the handle names no lease), and nothing else.
	h.restart()
	h.produce("orders", 0, 1)
	if c.broken >= 0 {
		err = h.node.Ack(ctx, "orders", router.Handle{Partition: int32(c.broken), Nonce: 1})
		wantContract(t, c.want.ack, err, "an ack")
	}
	msgs, err = h.node.Consume(ctx, "orders", router.ConsumeOptions{Pinned: true, Partition: 0})
	require.NoError(t, err, "the restarted node serves a healthy partition")
	require.Len(t, msgs, 1)
	h.ackAll(msgs)
	counted += h.node.Stats().HostContractViolations
	assert.NotZero(t, counted, "counted")
}

// TestHostContractStatsAndLog: a wrong answer is counted on every call that meets it, and
// logged at most once a minute per partition, with the number held back since; a wrong
// routes answer is judged (counted, logged) once, however often it is returned.
func TestHostContractStatsAndLog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &hostileCase{broken: 1, get: func() (router.Log, error) { return nil, nil }}
		h := newHostileHarness(t, c)
		lines := &logLines{}
		h.cfg.Logger = slog.New(slog.NewTextHandler(lines, nil))
		h.restart()
		defer func() { require.NoError(t, h.node.Close()) }()
		h.host.arm()
		ctx := context.Background()
		for range 5 {
			_, err := h.node.Consume(ctx, "orders", router.ConsumeOptions{Pinned: true, Partition: 1})
			require.ErrorIs(t, err, router.ErrHostContract)
			assert.ErrorContains(t, err, `Logs.Get("orders", 1) returned a nil Log and no error`)
		}
		assert.Equal(t, uint64(5), h.node.Stats().HostContractViolations)
		assert.Equal(t, 1, lines.count("refuses the answer"), "logged once")
		time.Sleep(time.Minute)
		_, err := h.node.Consume(ctx, "orders", router.ConsumeOptions{Pinned: true, Partition: 1})
		require.ErrorIs(t, err, router.ErrHostContract)
		assert.Equal(t, 2, lines.count("refuses the answer"), "again a minute later")
		assert.Equal(t, 1, lines.count("suppressed=4"), "with the lines held back")

		c2 := &hostileCase{broken: 1, routes: func() ([]int32, map[string][]int32) { return []int32{0, 1, 1}, nil }}
		h2 := newHostileHarness(t, c2)
		defer func() { require.NoError(t, h2.node.Close()) }()
		h2.host.arm()
		for range 5 {
			_, err := h2.node.Consume(ctx, "orders", router.ConsumeOptions{Pinned: true, Partition: 1})
			require.ErrorIs(t, err, router.ErrHostContract)
			assert.ErrorContains(t, err, `Routes.Partitions("orders") named partition 1 twice for this node`)
		}
		assert.Equal(t, uint64(1), h2.node.Stats().HostContractViolations, "one answer, judged once")
	})
}

// panickingLogs panics in Get for partition 1 of "orders" while armed.
type panickingLogs struct {
	*routertest.MemLogs
	armed atomic.Bool
}

func (l *panickingLogs) Get(topic string, partition int32) (router.Log, error) {
	if l.armed.Load() && topic == "orders" && partition == 1 {
		panic("the host's own bug")
	}
	return l.MemLogs.Get(topic, partition)
}

// TestHostPanics: a panic of the host's code on a goroutine of the node is recovered there,
// counted and logged with its stack: on the pump, the consumer it reserved for answers it as
// ErrHostContract; in Config.OnQuarantine called by the purger, the record is quarantined
// all the same. On the caller's goroutine it propagates to the caller, and leaves the node
// serving.
func TestHostPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := &panickingLogs{MemLogs: &routertest.MemLogs{}}
		routes := &routertest.Routes{}
		routes.Set("orders", 0, 1)
		logs.Log("orders", 0)
		log1 := logs.Log("orders", 1)
		lines := &logLines{}
		quarantined := make(chan int64, 1)
		node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: crashfs.New(),
			Logger: slog.New(slog.NewTextHandler(lines, nil)),
			Topic: func(string) router.TopicConfig {
				return router.TopicConfig{VisibilityTimeout: time.Second, MaxDeliveries: 1}
			},
			OnQuarantine: func(_ string, _ int32, offset int64, _ uint32) {
				quarantined <- offset
				panic("the host's callback bug")
			}})
		require.NoError(t, err)
		defer func() { require.NoError(t, node.Close()) }()
		ctx := context.Background()

		// On the pump goroutine: a consumer parked on partition 1, then Get panics.
		done := make(chan error, 1)
		go func() {
			_, err := node.Consume(ctx, "orders", router.ConsumeOptions{Pinned: true, Partition: 1, Wait: time.Hour})
			done <- err
		}()
		synctest.Wait()
		logs.armed.Store(true)
		log1.Append(nil, []byte("v"), time.Now())
		node.Appended("orders", 1, 1)
		synctest.Wait()
		select {
		case err := <-done:
			require.ErrorIs(t, err, router.ErrHostContract)
			assert.ErrorContains(t, err, "the host's own bug")
		default:
			t.Fatal("the parked consumer was not answered")
		}
		assert.Equal(t, uint64(1), node.Stats().HostPanics)
		assert.Equal(t, 1, lines.count("recovered a panic"))
		assert.Equal(t, 1, lines.count("hostseams_test.go"), "with the stack")

		// On the caller's goroutine: it propagates, and the node goes on serving.
		assert.PanicsWithValue(t, "the host's own bug", func() {
			node.Consume(ctx, "orders", router.ConsumeOptions{Pinned: true, Partition: 1})
		})
		logs.armed.Store(false)
		off := logs.Log("orders", 0).Append(nil, []byte("v"), time.Now())
		node.Appended("orders", 0, off+1)
		msgs, err := node.Consume(ctx, "orders", router.ConsumeOptions{Pinned: true, Partition: 0})
		require.NoError(t, err)
		require.Len(t, msgs, 1)

		// On the purger: the lease lapses unacked, its last delivery, and OnQuarantine panics.
		time.Sleep(2 * time.Second)
		synctest.Wait()
		require.Equal(t, off, <-quarantined)
		assert.Equal(t, uint64(2), node.Stats().HostPanics)
		q, err := node.Quarantined("orders", 0)
		require.NoError(t, err)
		assert.Equal(t, []int64{off}, q)
	})
}

// panickingTransport panics in Call; it does not promise to honour its context, so the node
// calls it from a goroutine of its own.
type panickingTransport struct{}

func (panickingTransport) Call(context.Context, string, []byte) ([]byte, error) {
	panic("the host's transport bug")
}

// TestTransportPanics: a Transport whose Call panics, called from the node's own goroutine,
// fails that call as one with no reply, counted, and the process lives on.
func TestTransportPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs, routes := &routertest.MemLogs{}, &routertest.Routes{}
		routes.Set("orders", 0)
		routes.SetRemote("orders", "b", 1)
		logs.Log("orders", 0)
		node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: crashfs.New(),
			Transport: panickingTransport{}})
		require.NoError(t, err)
		defer func() { require.NoError(t, node.Close()) }()
		err = node.Ack(context.Background(), "orders", router.Handle{Partition: 1, Nonce: 1})
		require.Error(t, err)
		assert.True(t, errors.Is(err, router.ErrTransport) || errors.Is(err, router.ErrHostContract), "%v", err)
		assert.Equal(t, uint64(1), node.Stats().HostPanics)
	})
}

// TestOfferContainsHostPanics: an owner offers its records to the tokens other nodes left
// from whatever goroutine woke it (an append, the purger, a hold timer, a registration
// served): a panic of its host's logs there is recovered and counted, offers nothing, and
// the next offer, once the host behaves, serves the consumer parked on the other node.
func TestOfferContainsHostPanics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs *panickingLogs
		c := newCluster(t, rtt, map[string][]int32{"b": {1}, "g": nil}, func(id string, cfg *router.Config) {
			if id == "b" {
				logs = &panickingLogs{MemLogs: cfg.Logs.(*routertest.MemLogs)}
				cfg.Logs = logs
			}
		})
		defer c.close()
		b, g := c.nodes["b"], c.nodes["g"]
		got := g.async(context.Background(), router.ConsumeOptions{Wait: 30 * time.Second})
		time.Sleep(100 * time.Millisecond) // parked, its token left with b
		synctest.Wait()
		require.Equal(t, 1, g.node.Parked("orders"))

		logs.armed.Store(true)
		c.produce(1, 1) // b.Appended offers on the producer's goroutine: contained there too
		synctest.Wait()
		assert.Equal(t, uint64(1), b.node.Stats().HostPanics)
		assert.Zero(t, b.node.Stats().Remote.Notified, "a panic offers nothing")

		logs.armed.Store(false)
		time.Sleep(5 * time.Second) // g's keeper registers again, and b offers again
		synctest.Wait()
		select {
		case msgs := <-got:
			require.Len(t, msgs, 1)
			assert.Equal(t, int32(1), msgs[0].Partition)
		default:
			t.Fatal("the consumer parked on g was never told of the record")
		}
	})
}
