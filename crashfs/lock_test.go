package crashfs

import (
	"errors"
	"io/fs"
	"testing"
)

// TryLock is exclusive per path, released by unlock and by a crash, never inherited.
func TestTryLock(t *testing.T) {
	f := New()
	if err := f.MkdirAll("/state"); err != nil {
		t.Fatal(err)
	}
	unlock, ok, err := f.TryLock("/state/LOCK")
	if err != nil || !ok {
		t.Fatalf("first TryLock: ok=%v err=%v", ok, err)
	}
	if _, ok, err := f.TryLock("state/LOCK"); err != nil || ok {
		t.Fatalf("second TryLock of the same path: ok=%v err=%v, want held", ok, err)
	}
	if _, ok, err := f.TryLock("/state/OTHER"); err != nil || !ok {
		t.Fatalf("another path: ok=%v err=%v", ok, err)
	}
	if _, _, err := f.TryLock("/missing/LOCK"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("TryLock in a missing directory: %v, want ErrNotExist", err)
	}
	if err := unlock(); err != nil {
		t.Fatal(err)
	}
	again, ok, err := f.TryLock("/state/LOCK")
	if err != nil || !ok {
		t.Fatalf("TryLock after unlock: ok=%v err=%v", ok, err)
	}
	g := f.ProcessCrash()
	if _, ok, err := g.TryLock("/state/LOCK"); err != nil || !ok {
		t.Fatalf("TryLock after a process crash: ok=%v err=%v, want free", ok, err)
	}
	if err := again(); err != nil {
		t.Fatalf("unlock on the frozen file system: %v", err)
	}
	if _, _, err := f.TryLock("/state/LOCK"); !errors.Is(err, ErrCrashed) {
		t.Fatalf("TryLock on the frozen file system: %v, want ErrCrashed", err)
	}
	h := g.PowerCut(PowerCut{})
	if _, ok, err := h.TryLock("/state/LOCK"); err != nil || !ok {
		t.Fatalf("TryLock after a power cut: ok=%v err=%v, want free", ok, err)
	}
}
