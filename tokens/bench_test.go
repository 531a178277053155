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
		h, ok := q.Fire(epoch, 1)
		if !ok {
			b.Fatal("no fire")
		}
		if !q.Retire(h.To, epoch) {
			b.Fatal("no hold")
		}
		q.Register(h.To, time.Hour, epoch)
	}
}

// BenchmarkLapsingRegistrations is one op of 100,000 registrations on a fresh queue from
// requesters of distinct names, as an owner's router sees them: each registration is
// followed by Tokens and Idle, one arrives every millisecond and each lives 10 ms, so all
// but the last few have lapsed when the next arrives. Each method's cost must not grow with
// the tokens that lapsed before.
func BenchmarkLapsingRegistrations(b *testing.B) {
	names := make([]string, 100_000)
	for i := range names {
		names[i] = "node-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	for b.Loop() {
		var q Queue
		now := epoch
		for _, name := range names {
			q.Register(name, 10*time.Millisecond, now)
			if q.Tokens(now) == 0 || q.Idle(now) {
				b.Fatal("the token just registered is not live")
			}
			now = now.Add(time.Millisecond)
		}
	}
}
