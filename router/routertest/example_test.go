package routertest_test

import (
	"errors"
	"fmt"
	"time"

	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// MemLog keeps the router.Log contract, with knobs for retention, corruption and closing.
func ExampleMemLog() {
	log := routertest.NewMemLog()
	for _, v := range []string{"a", "b", "c", "d"} {
		log.Append(nil, []byte(v), time.Time{})
	}
	log.Trim(2)    // retention removed offsets 0 and 1
	log.Corrupt(3) // a bit flip on disk
	_, err := log.Read(1)
	fmt.Println(errors.Is(err, router.ErrNotFound))
	rec, _ := log.Read(2)
	fmt.Println(string(rec.Value))
	_, err = log.Read(3)
	fmt.Println(errors.Is(err, router.ErrCorrupt))
	log.Close()
	_, err = log.Read(2)
	fmt.Println(errors.Is(err, router.ErrLogClosed), log.Oldest(), log.HighWatermark())
	// Output:
	// true
	// c
	// true
	// true 2 4
}

// A host runs the conformance suite against its own log from a test:
//
//	func TestMyLog(t *testing.T) {
//		routertest.TestLog(t, routertest.LogHarness{
//			New:   func(t *testing.T) routertest.LogUnderTest { return openMyLog(t) },
//			Trim:  func(l routertest.LogUnderTest, oldest int64) error { return l.(*myLog).DeleteBefore(oldest) },
//			Close: func(l routertest.LogUnderTest) error { return l.(*myLog).Close() },
//			// The host's router.Logs too: Get of the partitions it has, and of others.
//			Logs: routertest.LogsHarness{
//				New:   func(t *testing.T) router.Logs { return openMyStore(t) }, // orders/0 and orders/1, of 1 and 2 records
//				Known: []routertest.Partition{{Topic: "orders", Partition: 0}, {Topic: "orders", Partition: 1}},
//			},
//		})
//	}
func ExampleTestLog() {}
