package tokens

import (
	"strconv"
	"testing"
	"time"
)

// queued returns a queue holding a live token of each of n distinct requesters, and their
// names.
func queued(n int) (*Queue, []string) {
	q := new(Queue)
	names := make([]string, n)
	for i := range names {
		names[i] = "node-" + strconv.Itoa(i)
		q.Register(names[i], time.Hour, epoch)
	}
	return q, names
}

// BenchmarkReRegister re-registers one of 1,000 queued requesters per op, cycling through
// them: the token is replaced in place, whatever the length of the queue. Target: at most
// 100 ns/op and 0 allocs/op.
func BenchmarkReRegister(b *testing.B) {
	q, names := queued(1000)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		q.Register(names[i%len(names)], time.Hour, epoch)
	}
}

// BenchmarkFire is one notification's life on the owner with 1,000 tokens queued: fire the
// oldest token, retire its hold (the claim arrives), and register the requester again (it
// goes to the tail).
func BenchmarkFire(b *testing.B) {
	q, _ := queued(1000)
	b.ReportAllocs()
	for b.Loop() {
		to, ok := q.Fire(epoch, 1)
		if !ok {
			b.Fatal("no fire")
		}
		if !q.Retire(to, epoch) {
			b.Fatal("no hold")
		}
		q.Register(to, time.Hour, epoch)
	}
}
