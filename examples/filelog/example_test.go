package filelog_test

import (
	"fmt"
	"os"

	"narad.dev/consume/examples/filelog"
)

// A store of topics of partitions on disk: append, read back, and reopen after a restart.
func Example() {
	dir, _ := os.MkdirTemp("", "filelog-example")
	defer os.RemoveAll(dir)

	store, err := filelog.Open(dir, filelog.Options{})
	if err != nil {
		panic(err)
	}
	if err := store.CreateTopic("orders", 2); err != nil {
		panic(err)
	}
	off, _ := store.Append("orders", 1, []byte("id-7"), []byte("two pizzas"))
	store.Close()

	store, _ = filelog.Open(dir, filelog.Options{})
	defer store.Close()
	log, _ := store.Get("orders", 1)
	rec, _ := log.Read(off)
	fmt.Printf("%s %s at %d, high watermark %d\n", rec.Key, rec.Value, off, log.HighWatermark())
	// Output: id-7 two pizzas at 0, high watermark 1
}
