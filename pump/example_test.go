package pump_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	"narad.dev/consume/pump"
)

// queue is a Source: a topic's records, taken one at a time.
type queue struct {
	mu      sync.Mutex
	records []string
}

func (q *queue) Take(topic string, pinned int32) (string, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.records) == 0 {
		return "", false
	}
	r := q.records[0]
	q.records = q.records[1:]
	return r, true
}

func (q *queue) Release(topic string, r string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.records = append([]string{r}, q.records...)
}

// A consumer that finds nothing parks; the record that arrives later is handed to it by the
// one pump goroutine, which reserves only for the waiter it popped.
func Example() {
	src := &queue{}
	p := pump.New[string](src)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx)

	got := make(chan string)
	go func() {
		r, _ := p.Wait(ctx, "orders", -1)
		got <- r
	}()
	for p.Parked("orders") == 0 {
		runtime.Gosched() // let the consumer park first, to show the wake
	}
	src.mu.Lock()
	src.records = append(src.records, "hello")
	src.mu.Unlock()
	p.Notify("orders") // the produce path's wake; free when nobody waits
	fmt.Println(<-got)
	// Output: hello
}
