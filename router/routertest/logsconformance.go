package routertest

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"

	"narad.dev/consume/router"
)

// The rules of router.Logs and router.ManyGetter, as the suite's failures name them.
const (
	ruleGetKnown       = "Get answers the log of a partition the host has: a nil Log with no error is ErrHostContract"
	ruleGetUnknown     = "Get answers an error, and no Log, for a partition the host does not have"
	ruleGetMany        = "GetMany fills into[i] with the log of partitions[i], none left nil (an entry left nil with no error is ErrHostContract)"
	ruleGetManyUnknown = "GetMany answers an error when a partition is unknown: an entry left nil with no error is ErrHostContract"
)

// noSuchTopic is the topic of the unknown partition the suite asks for when the harness
// names none.
const noSuchTopic = "routertest: no such topic"

// testLogs checks the host's router.Logs: Get of each known partition, twice (the node
// resolves a partition again on every call), Get of unknown ones, GetMany when offered, and
// both from several goroutines at once.
func testLogs(t suite, h LogsHarness) {
	if len(h.Known) == 0 {
		t.Fatal("routertest: LogsHarness.Known names no partition")
	}
	logs := h.New(t.host())
	for range 2 {
		for _, p := range h.Known {
			getKnown(t, logs, p)
		}
	}
	unknown := unknownPartitions(h)
	for _, p := range unknown {
		getUnknown(t, logs, p)
	}
	many, ok := logs.(router.ManyGetter)
	if ok {
		checkGetMany(t, logs, many, h.Known, unknown)
	}
	_, known := byTopic(h.Known)
	var w workers
	for range 4 {
		w.goCheck(func(t failer) {
			for range 20 {
				for _, p := range h.Known {
					getKnown(t, logs, p)
				}
				if many != nil {
					for topic, ps := range known {
						if err := many.GetMany(topic, ps, make([]router.Log, len(ps))); err != nil {
							broke(t, ruleGetMany, "GetMany(%q, %v) beside other Gets answered %v", topic, ps, err)
						}
					}
				}
			}
		})
	}
	w.wait(t)
}

// unknownPartitions returns the partitions h's Logs does not have: those it names, or
// else the one after the highest known of each topic, and one of a topic no host has.
func unknownPartitions(h LogsHarness) []Partition {
	if h.Unknown != nil {
		return h.Unknown
	}
	var unknown []Partition
	topics, of := byTopic(h.Known)
	for _, topic := range topics {
		unknown = append(unknown, Partition{topic, slices.Max(of[topic]) + 1})
	}
	return append(unknown, Partition{noSuchTopic, 0})
}

// byTopic groups partitions by topic, keeping their order: topics in the order they first
// come, of[topic] the topic's partitions.
func byTopic(ps []Partition) (topics []string, of map[string][]int32) {
	of = map[string][]int32{}
	for _, p := range ps {
		if of[p.Topic] == nil {
			topics = append(topics, p.Topic)
		}
		of[p.Topic] = append(of[p.Topic], p.Partition)
	}
	return topics, of
}

// isNil reports whether l is nil or holds a nil pointer (or map, or func, ...), which a
// node would call methods on and panic.
func isNil(l router.Log) bool {
	if l == nil {
		return true
	}
	switch v := reflect.ValueOf(l); v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// describeLog says what a Get answered as its Log, for a failure.
func describeLog(l router.Log) string {
	switch {
	case l == nil:
		return "a nil Log"
	case isNil(l):
		return fmt.Sprintf("a nil %T", l)
	}
	return fmt.Sprintf("a %T", l)
}

// getKnown gets the log of a partition the host has and checks it is one: not nil, with
// watermarks that keep their rules, and no ErrNotFound at Oldest.
func getKnown(t failer, logs router.Logs, p Partition) router.Log {
	t.Helper()
	call := fmt.Sprintf("Get(%q, %d)", p.Topic, p.Partition)
	l, err := logs.Get(p.Topic, p.Partition)
	switch {
	case err != nil:
		broke(t, ruleGetKnown, "%s answered %v for a partition the host has", call, err)
	case isNil(l):
		broke(t, ruleGetKnown, "%s answered %s and no error", call, describeLog(l))
	}
	var w watermarks
	if oldest, hwm := w.check(t, l, call); hwm > oldest {
		if _, err := l.Read(oldest); errors.Is(err, router.ErrNotFound) {
			broke(t, ruleNotFoundOnlyBelow, "Read(%d) of the log %s answered %v with Oldest at %d", oldest, call, err, oldest)
		}
	}
	return l
}

// getUnknown gets a partition the host does not have and checks it answers an error and
// no log.
func getUnknown(t failer, logs router.Logs, p Partition) {
	t.Helper()
	call := fmt.Sprintf("Get(%q, %d)", p.Topic, p.Partition)
	l, err := logs.Get(p.Topic, p.Partition)
	switch {
	case err == nil:
		broke(t, ruleGetUnknown, "%s answered %s and no error", call, describeLog(l))
	case !isNil(l):
		broke(t, ruleGetUnknown, "%s answered %s with its error %v", call, describeLog(l), err)
	}
}

// sameLog reports whether a and b answer alike: the same watermarks and the same records
// at both ends, as the log of one partition does.
func sameLog(a, b router.Log) bool {
	if a.Oldest() != b.Oldest() || a.HighWatermark() != b.HighWatermark() {
		return false
	}
	for _, off := range []int64{a.Oldest(), a.HighWatermark() - 1} {
		if off < a.Oldest() {
			continue
		}
		ra, errA := a.Read(off)
		rb, errB := b.Read(off)
		if (errA == nil) != (errB == nil) || !bytes.Equal(ra.Key, rb.Key) || !bytes.Equal(ra.Value, rb.Value) {
			return false
		}
	}
	return true
}

// checkGetMany checks GetMany of each known topic's partitions, in the order given and
// reversed, against Get, and with an unknown partition among them.
func checkGetMany(t failer, logs router.Logs, many router.ManyGetter, known, unknown []Partition) {
	t.Helper()
	topics, of := byTopic(known)
	for _, topic := range topics {
		ps := of[topic]
		reversed := slices.Clone(ps)
		slices.Reverse(reversed)
		for _, order := range [][]int32{ps, reversed} {
			into := make([]router.Log, len(order))
			call := fmt.Sprintf("GetMany(%q, %v)", topic, order)
			if err := many.GetMany(topic, order, into); err != nil {
				broke(t, ruleGetMany, "%s answered %v for partitions the host has", call, err)
			}
			for i, p := range order {
				if isNil(into[i]) {
					broke(t, ruleGetMany, "%s left into[%d] %s and answered no error", call, i, describeLog(into[i]))
				}
				if want := getKnown(t, logs, Partition{topic, p}); !sameLog(into[i], want) {
					broke(t, ruleGetMany, "%s filled into[%d] with a log unlike Get(%q, %d)'s (Oldest %d, HighWatermark %d; Get's %d, %d)",
						call, i, topic, p, into[i].Oldest(), into[i].HighWatermark(), want.Oldest(), want.HighWatermark())
				}
			}
		}
	}
	for _, u := range unknown {
		// The unknown partition after the known ones of its topic, and before them.
		ps := of[u.Topic]
		for _, order := range [][]int32{append(slices.Clone(ps), u.Partition), append([]int32{u.Partition}, ps...)} {
			into := make([]router.Log, len(order))
			if err := many.GetMany(u.Topic, order, into); err == nil {
				i := slices.Index(order, u.Partition)
				broke(t, ruleGetManyUnknown, "GetMany(%q, %v) answered no error, with partition %d unknown (into[%d] %s)",
					u.Topic, order, u.Partition, i, describeLog(into[i]))
			}
		}
	}
}
