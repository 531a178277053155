package router_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/internal/cputime"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// The ordered topic's load benchmarks: one partition (a key lives in one, so a key's share
// of the records is its partition's, and what it does to the other keys is undiluted by
// partitions it does not touch), 10,000 other keys round robin, consumers consuming (no
// wait) and acking batches. Each op is two runs on fresh nodes, the load and its baseline,
// in turn (which goes first alternates, so the machine's drift lands on both), and the
// figures are ratios of the two in the same op.

const (
	orderedLoadKeys = 10_000
	// orderedStallTries is how many consumes in a row, over all consumers, may find nothing
	// while records remain to be delivered before the run is declared stalled. An empty
	// consume is legitimate while the records left wait behind keys other consumers hold
	// (they ack within a few of the scheduler's turns: Gosched follows each empty consume);
	// a partition that stopped handing out records makes every consume empty.
	orderedStallTries = 200_000
)

// BenchmarkOrderedHungKey: a key holds 5 % of the records (every 20th) and its holder hangs:
// it took the key's first record (offset 0) before the run and keeps extending its lease,
// never acking. The other keys' records are consumed and acked; the baseline is the same run
// with no hung key (the other keys' records alone, in the same order). A run holds 60,000
// records (ROUTER_BENCH_HUNG_RECORDS sets another count), so 3,000 of the hung key's records
// pile up deferred behind it: three times the acked-ahead runs a partition keeps by default
// (DefaultMaxAckedAheadRuns, one run per hole), under MaxDeferred. ROUTER_BENCH_HUNG_SIDE=hung
// or =baseline runs that side alone (for a tool that counts the whole process, as
// cachegrind does); the ratios are then not reported.
//
// Metrics: cpu-ns/rec and rec/s of the other keys with the hung key (hung-) and without
// (base-); cpu-ratio is base ÷ hung CPU per record and rate-ratio hung ÷ base records/s, the
// other keys' throughput against the baseline's (the goal: at least 0.9); stalls/run the
// partition's AckedAheadStalls in a hung run. The benchmark fails when the other keys stop
// flowing (orderedStallTries empty consumes in a row while their records remain). Each run's
// setup garbage is collected before its clock starts (see orderedLoad.collectFirst).
func BenchmarkOrderedHungKey(b *testing.B) {
	records := 60_000
	if v, err := strconv.Atoi(os.Getenv("ROUTER_BENCH_HUNG_RECORDS")); err == nil && v > 0 {
		records = v
	}
	for _, batch := range []int{1, 100} {
		for _, consumers := range []int{1, 64} {
			b.Run(fmt.Sprintf("batch=%d/consumers=%d", batch, consumers), func(b *testing.B) {
				hung := []byte("hung")
				withHung := make([][]byte, records)
				var without [][]byte
				other := 0
				for i := range withHung {
					if i%20 == 0 {
						withHung[i] = hung
						continue
					}
					withHung[i] = fmt.Appendf(nil, "key-%d", other%orderedLoadKeys)
					without = append(without, withHung[i])
					other++
				}
				var hungSum, baseSum orderedRunResult
				b.ReportAllocs()
				for i := range b.N {
					runs := [2]func(){
						func() {
							hungSum.add(runOrdered(b, orderedLoad{keys: withHung, special: hung, hang: true, batch: batch, consumers: consumers, collectFirst: true}))
						},
						func() {
							baseSum.add(runOrdered(b, orderedLoad{keys: without, batch: batch, consumers: consumers, collectFirst: true}))
						},
					}
					switch os.Getenv("ROUTER_BENCH_HUNG_SIDE") {
					case "hung":
						runs[0]()
					case "baseline":
						runs[1]()
					default:
						runs[i%2]()
						runs[1-i%2]()
					}
				}
				if hungSum.records == 0 || baseSum.records == 0 {
					return // one side alone: nothing to compare
				}
				hungCPU, baseCPU := hungSum.cpuPerOther(), baseSum.cpuPerOther()
				hungRate, baseRate := hungSum.othersRate(), baseSum.othersRate()
				b.ReportMetric(hungCPU, "hung-cpu-ns/rec")
				b.ReportMetric(baseCPU, "base-cpu-ns/rec")
				b.ReportMetric(baseCPU/hungCPU, "cpu-ratio")
				b.ReportMetric(hungRate, "hung-rec/s")
				b.ReportMetric(baseRate, "base-rec/s")
				b.ReportMetric(hungRate/baseRate, "rate-ratio")
				b.ReportMetric(float64(hungSum.ackedAheadStalls)/float64(b.N), "stalls/run")
			})
		}
	}
}

// BenchmarkOrderedHotKey: one key holds 50 % of the records (every other one), beside
// 10,000 other keys; every record is consumed and acked. The hot key's records must come in
// offset order, each once, to one holder at a time (the benchmark fails otherwise). The
// baseline is the same run with the hot key's records keyed over the other keys, as the rest
// are: no hot key. A run holds 40,000 records.
//
// Metrics: others-rec/s is the records/s of the other keys' records (the odd offsets), from
// the run's start until the last of them is delivered, with the hot key (hot-) and in the
// baseline (base-, the same offsets); others-ratio is hot ÷ base (the goal: the others at
// full rate, 1), and others-cpu-ratio the same in the process's CPU time until then, base ÷
// hot (steadier than wall time on a shared machine); all-cpu-ratio is the CPU per record of the whole run, base ÷ hot;
// deferred-stalls/run the partition's DeferredStalls in a hot run (MaxDeferred reached).
func BenchmarkOrderedHotKey(b *testing.B) {
	const records = 40_000
	for _, batch := range []int{1, 100} {
		for _, consumers := range []int{1, 64} {
			b.Run(fmt.Sprintf("batch=%d/consumers=%d", batch, consumers), func(b *testing.B) {
				hot := []byte("hot")
				withHot := make([][]byte, records)
				spread := make([][]byte, records)
				for i := range withHot {
					spread[i] = fmt.Appendf(nil, "key-%d", i%orderedLoadKeys)
					withHot[i] = spread[i]
					if i%2 == 0 {
						withHot[i] = hot
					}
				}
				odd := func(offset int64, _ []byte) bool { return offset%2 == 1 }
				var hotSum, baseSum orderedRunResult
				b.ReportAllocs()
				for i := range b.N {
					runs := [2]func(){
						func() {
							hotSum.add(runOrdered(b, orderedLoad{keys: withHot, special: hot, others: odd, batch: batch, consumers: consumers}))
						},
						func() {
							baseSum.add(runOrdered(b, orderedLoad{keys: spread, others: odd, batch: batch, consumers: consumers}))
						},
					}
					runs[i%2]()
					runs[1-i%2]()
				}
				hotRate, baseRate := hotSum.othersRate(), baseSum.othersRate()
				b.ReportMetric(hotRate, "hot-others-rec/s")
				b.ReportMetric(baseRate, "base-others-rec/s")
				b.ReportMetric(hotRate/baseRate, "others-ratio")
				b.ReportMetric(float64(baseSum.othersCPU)/float64(hotSum.othersCPU), "others-cpu-ratio")
				b.ReportMetric(hotSum.cpuPerRecord(), "hot-cpu-ns/rec")
				b.ReportMetric(baseSum.cpuPerRecord(), "base-cpu-ns/rec")
				b.ReportMetric(baseSum.cpuPerRecord()/hotSum.cpuPerRecord(), "all-cpu-ratio")
				b.ReportMetric(float64(hotSum.deferredStalls)/float64(b.N), "deferred-stalls/run")
				// A record of the hot key deferred once waits its turn; deferred again, it was
				// read again by a consume that lost the race for the key.
				b.ReportMetric(float64(hotSum.deferrals)/float64(hotSum.records), "deferrals/rec")
			})
		}
	}
}

// orderedLoad is one run of runOrdered.
type orderedLoad struct {
	keys    [][]byte // the key of each record of the one partition, by offset
	special []byte   // the hung or hot key; nil for none
	// hang: a holder takes the special key's first record (offset 0) before the run and
	// keeps its lease, extending it, for the whole run; the special key's records are not
	// delivered. Otherwise every record is, and the special key's must come in order, to
	// one holder at a time.
	hang bool
	// others tells the records the run's rate counts; nil: those not of the special key.
	others           func(offset int64, key []byte) bool
	batch, consumers int
	// collectFirst: the garbage of the run's setup (the log built, the previous run's node)
	// is collected before the clock starts. Otherwise the collection it calls for lands in
	// the timed part of whichever run reaches the collector's goal there, and the two sides
	// of a comparison, whose setups differ in size, do not reach it alike.
	collectFirst bool
}

// orderedRunResult sums runs.
type orderedRunResult struct {
	records, othersCount int64         // records delivered and acked; those counted as others
	cpu                  int64         // the process's CPU time over the runs, ns
	othersWall           time.Duration // from each run's start until its last other record came
	othersCPU            int64         // the process's CPU time over the same, ns
	ackedAheadStalls     uint64
	deferredStalls       uint64
	deferrals            uint64 // records deferred behind their keys, a record once per deferral
}

func (r *orderedRunResult) add(o orderedRunResult) {
	r.records += o.records
	r.othersCount += o.othersCount
	r.cpu += o.cpu
	r.othersWall += o.othersWall
	r.othersCPU += o.othersCPU
	r.ackedAheadStalls += o.ackedAheadStalls
	r.deferredStalls += o.deferredStalls
	r.deferrals += o.deferrals
}

func (r *orderedRunResult) cpuPerOther() float64 { return float64(r.cpu) / float64(r.othersCount) }
func (r *orderedRunResult) cpuPerRecord() float64 {
	return float64(r.cpu) / float64(r.records)
}
func (r *orderedRunResult) othersRate() float64 {
	return float64(r.othersCount) / r.othersWall.Seconds()
}

// runOrdered builds a node with one ordered partition holding load's records, runs its
// consumers until every record to deliver is acked, and returns what it measured. The timer
// runs only while the consumers do.
func runOrdered(b *testing.B, load orderedLoad) orderedRunResult {
	b.StopTimer()
	logs := &routertest.MemLogs{}
	routes := &routertest.Routes{}
	routes.Set("t", 0)
	log := logs.Log("t", 0)
	value := []byte("a payload of 32 bytes, or so...")
	isOther := load.others
	if isOther == nil {
		isOther = func(_ int64, key []byte) bool { return load.special == nil || !bytes.Equal(key, load.special) }
	}
	var deliver, others int64
	var specials []int64 // the special key's offsets, in order
	for i, key := range load.keys {
		log.AppendRecord(router.Record{Key: key, Value: value})
		if isOther(int64(i), key) {
			others++
		}
		if load.special != nil && bytes.Equal(key, load.special) {
			specials = append(specials, int64(i))
			if load.hang {
				continue
			}
		}
		deliver++
	}
	// The in-flight cap is raised out of the way (64 consumers hold up to 6,400 records);
	// the acked-ahead and deferred caps are the defaults: what the load is about.
	node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/state", FS: crashfs.New(),
		Topic: func(string) router.TopicConfig {
			return router.TopicConfig{Ordered: true, MaxInFlight: 1 << 20}
		}})
	if err != nil {
		b.Fatal(err)
	}
	defer node.Close()
	ctx := context.Background()

	stopHang := make(chan struct{})
	var hangWG sync.WaitGroup
	var hangErr atomic.Value
	if load.hang {
		msgs, err := node.Consume(ctx, "t", router.ConsumeOptions{})
		if err != nil || len(msgs) != 1 || msgs[0].Offset != specials[0] {
			b.Fatalf("the hung holder's consume: %v, %d records (%v), want offset %d", err, len(msgs), msgs, specials[0])
		}
		held := msgs[0].Receipt
		hangWG.Go(func() {
			tick := time.NewTicker(100 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stopHang:
					return
				case <-tick.C:
					if _, err := node.Extend(ctx, "t", held, 0); err != nil {
						hangErr.Store(fmt.Errorf("the hung holder's extend: %w", err))
						return
					}
				}
			}
		})
	}

	var (
		left       atomic.Int64 // records not yet taken by a consume
		othersLeft atomic.Int64
		empties    atomic.Int64 // consumes in a row, over all consumers, that found nothing
		stop       atomic.Bool
		failMu     sync.Mutex
		failure    string
		holders    atomic.Int32 // consumes holding special records now
		nextSpec   atomic.Int64 // index in specials of the next special record due
		othersDone time.Time
		othersCPU  int64
		doneMu     sync.Mutex
		wg         sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		failMu.Lock()
		if failure == "" {
			failure = fmt.Sprintf(format, args...)
		}
		failMu.Unlock()
		stop.Store(true)
	}
	left.Store(deliver)
	othersLeft.Store(others)
	if load.collectFirst {
		runtime.GC()
	}
	b.StartTimer()
	start := time.Now()
	cpu := cputime.Process()
	// The consumers' samples in a CPU profile carry the run they belong to (pprof
	// -tagfocus run=special or run=baseline).
	run := "baseline"
	if load.special != nil {
		run = "special"
	}
	labels := pprof.Labels("run", run)
	for range load.consumers {
		wg.Go(func() {
			pprof.SetGoroutineLabels(pprof.WithLabels(ctx, labels))
			handles := make([]router.Handle, 0, load.batch)
			var msgs []router.Message
			for !stop.Load() {
				// Take up to a batch of what is left; what the consume does not deliver
				// goes back, and its taker loops to take it again, so the run ends only
				// once every record was delivered.
				l := left.Load()
				if l <= 0 {
					return
				}
				want := min(l, int64(load.batch))
				if !left.CompareAndSwap(l, l-want) {
					continue
				}
				var err error
				msgs, err = node.ConsumeAppend(ctx, msgs[:0], "t", router.ConsumeOptions{Max: int(want)})
				if err != nil {
					fail("consume: %v", err)
					return
				}
				left.Add(want - int64(len(msgs)))
				if len(msgs) == 0 {
					if n := empties.Add(1); n >= orderedStallTries {
						fail("stalled: %d consumes in a row found nothing, %d records left to deliver (%d of other keys)",
							n, left.Load(), othersLeft.Load())
						return
					}
					runtime.Gosched()
					continue
				}
				empties.Store(0)
				special := 0
				for i := range msgs {
					m := &msgs[i]
					if isOther(m.Offset, m.Key) {
						if othersLeft.Add(-1) == 0 {
							doneMu.Lock()
							othersDone, othersCPU = time.Now(), cputime.Process()
							doneMu.Unlock()
						}
					}
					if load.special == nil || !bytes.Equal(m.Key, load.special) {
						continue
					}
					if load.hang {
						fail("a record of the hung key delivered: offset %d", m.Offset)
						return
					}
					if special == 0 {
						if h := holders.Add(1); h != 1 {
							fail("the special key held by %d consumes at once", h)
						}
					}
					special++
					// Only the key's one holder gets here: the check and the store race with
					// no one.
					if due := nextSpec.Load(); due >= int64(len(specials)) || specials[due] != m.Offset {
						fail("the special key's record at offset %d delivered out of order: due #%d of %d", m.Offset, due, len(specials))
					}
					nextSpec.Add(1)
				}
				if special > 0 {
					holders.Add(-1) // before the acks free the key
				}
				if load.batch == 1 {
					if err := node.Ack(ctx, "t", msgs[0].Receipt); err != nil {
						fail("ack: %v", err)
					}
					continue
				}
				handles = handles[:0]
				for i := range msgs {
					handles = append(handles, msgs[i].Receipt)
				}
				for _, err := range node.AckBatch(ctx, "t", handles) {
					if err != nil {
						fail("ack: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	used := cputime.Process() - cpu
	b.StopTimer()
	close(stopHang)
	hangWG.Wait()
	counters := node.Stats().Shards
	if err, _ := hangErr.Load().(error); err != nil && failure == "" {
		failure = err.Error()
	}
	if failure != "" {
		b.Fatalf("%s (AckedAheadStalls %d, DeferredStalls %d, Deferred %d)", failure,
			counters.AckedAheadStalls, counters.DeferredStalls, counters.Deferred)
	}
	if !load.hang && nextSpec.Load() != int64(len(specials)) {
		b.Fatalf("%d of the special key's %d records delivered", nextSpec.Load(), len(specials))
	}
	if othersDone.IsZero() {
		othersDone, othersCPU = time.Now(), cputime.Process()
	}
	b.StartTimer()
	return orderedRunResult{
		records:          deliver,
		othersCount:      others,
		cpu:              used,
		othersWall:       othersDone.Sub(start),
		othersCPU:        othersCPU - cpu,
		ackedAheadStalls: counters.AckedAheadStalls,
		deferredStalls:   counters.DeferredStalls,
		deferrals:        counters.Deferred,
	}
}
