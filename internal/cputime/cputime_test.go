package cputime

import (
	"runtime"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// spin burns CPU on the calling thread until read reports more than it did at the start
// (clocks tick in steps of up to a scheduler tick), or gives up after many rounds.
func spin(read func() int64) (before, after int64) {
	before = read()
	sink := uint64(1)
	for range 1 << 12 {
		for i := range 1 << 16 {
			sink = sink*6364136223846793005 + uint64(i)
		}
		if after = read(); after > before {
			break
		}
	}
	runtime.KeepAlive(sink)
	return before, after
}

func TestProcessAdvances(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "js" || runtime.GOOS == "wasip1" || runtime.GOOS == "plan9" {
		t.Skip("not read on", runtime.GOOS)
	}
	before, after := spin(Process)
	if before <= 0 || after <= before {
		t.Fatalf("Process: %d then %d after burning CPU", before, after)
	}
}

func TestThreadAdvances(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	_, ok := Thread()
	if runtime.GOOS != "linux" {
		if ok {
			t.Fatal("a thread's time is read only on linux")
		}
		return
	}
	if !ok {
		t.Fatal("Thread not read on linux")
	}
	read := func() int64 { ns, _ := Thread(); return ns }
	before, after := spin(read)
	if after <= before {
		t.Fatalf("Thread: %d then %d after burning CPU", before, after)
	}
	if process := Process(); process < after {
		t.Fatalf("the process (%d ns) used less than one of its threads (%d ns)", process, after)
	}
}

func BenchmarkProcess(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		Process()
	}
}
