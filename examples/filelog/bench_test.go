package filelog

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkAppend appends 100-byte records (16-byte keys) to one partition in 1 MiB
// segments.
func BenchmarkAppend(b *testing.B) {
	for _, policy := range []struct {
		name string
		sync SyncPolicy
	}{{"SyncNone", SyncNone}, {"SyncEveryAppend", SyncEveryAppend}} {
		b.Run(policy.name, func(b *testing.B) {
			s, err := Open(b.TempDir(), Options{Sync: policy.sync, MaxSegments: 8})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			if err := s.CreateTopic("bench", 1); err != nil {
				b.Fatal(err)
			}
			l, _ := s.Log("bench", 0)
			key, value := make([]byte, 16), make([]byte, 100)
			now := time.Now()
			b.SetBytes(int64(len(key) + len(value)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := l.Append(key, value, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkRead reads 100-byte records at scattered offsets of a 100,000-record partition
// (in the page cache).
func BenchmarkRead(b *testing.B) {
	s, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateTopic("bench", 1); err != nil {
		b.Fatal(err)
	}
	l, _ := s.Log("bench", 0)
	const n = 100_000
	for i := range n {
		if _, err := l.Append(fmt.Appendf(nil, "key-%012d", i), make([]byte, 100), time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	b.SetBytes(116)
	b.ReportAllocs()
	off := int64(0)
	for b.Loop() {
		off = (off + 7919) % n // a prime stride: every offset, out of order
		if _, err := l.Read(off); err != nil {
			b.Fatal(err)
		}
	}
}
