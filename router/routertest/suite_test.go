package routertest

import (
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

// recordingSuite runs the suite's sections as *testing.T runs sub-tests, each on a goroutine
// of its own, and records what they report instead of failing the test: the kit's own tests
// check with it that the suite fails a broken log, and with which rule. The first failure
// ends the run, as -failfast does, so the failure recorded is the first the log shows; a
// panic in a section is recorded as a failure.
type recordingSuite struct {
	t      *testing.T // the test running the suite: it owns what the harness makes
	name   string
	run    *recordedRun
	failed bool // guarded by run.mu
}

// recordedRun is what one run of the suite reported.
type recordedRun struct {
	mu       sync.Mutex
	failures []string
}

var _ suite = (*recordingSuite)(nil)

// runRecorded runs f as the top section of the suite, and returns the first failure it
// reports ("" when none).
func runRecorded(t *testing.T, f func(suite)) string {
	run := &recordedRun{}
	(&recordingSuite{t: t, name: t.Name(), run: run}).Run("suite", f)
	if len(run.failures) == 0 {
		return ""
	}
	return run.failures[0]
}

func (s *recordingSuite) host() *testing.T { return s.t }

func (s *recordingSuite) Run(name string, f func(suite)) bool {
	s.run.mu.Lock()
	stopped := len(s.run.failures) > 0
	s.run.mu.Unlock()
	if stopped {
		return false
	}
	sub := &recordingSuite{t: s.t, name: s.name + "/" + name, run: s.run}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() {
			if r := recover(); r != nil {
				sub.Errorf("panic: %v\n%s", r, debug.Stack())
			}
		}()
		f(sub)
	}()
	<-done
	s.run.mu.Lock()
	defer s.run.mu.Unlock()
	if sub.failed {
		s.failed = true
	}
	return !sub.failed
}

func (s *recordingSuite) Helper()      {}
func (s *recordingSuite) Name() string { return s.name }

func (s *recordingSuite) Logf(string, ...any) {}
func (s *recordingSuite) Log(...any)          {}

func (s *recordingSuite) Errorf(format string, args ...any) {
	s.run.mu.Lock()
	defer s.run.mu.Unlock()
	s.failed = true
	s.run.failures = append(s.run.failures, s.name+": "+fmt.Sprintf(format, args...))
}

func (s *recordingSuite) Error(args ...any) { s.Errorf("%s", fmt.Sprint(args...)) }

func (s *recordingSuite) Fatalf(format string, args ...any) {
	s.Errorf(format, args...)
	s.FailNow()
}

func (s *recordingSuite) Fatal(args ...any) {
	s.Error(args...)
	s.FailNow()
}

func (s *recordingSuite) Fail() {
	s.run.mu.Lock()
	defer s.run.mu.Unlock()
	s.failed = true
}

func (s *recordingSuite) FailNow() {
	s.Fail()
	runtime.Goexit()
}

func (s *recordingSuite) Failed() bool {
	s.run.mu.Lock()
	defer s.run.mu.Unlock()
	return s.failed
}

func (s *recordingSuite) Skipf(string, ...any) { runtime.Goexit() }
func (s *recordingSuite) Skip(...any)          { runtime.Goexit() }
func (s *recordingSuite) SkipNow()             { runtime.Goexit() }

// quietRapid sets rapid, until the test ends, for properties the test expects to fail: no
// fail file saved for each, and next to no shrinking, since the test needs the failure's
// message, not its smallest case. Neither changes whether a property fails.
func quietRapid(t *testing.T) {
	for name, value := range map[string]string{"rapid.nofailfile": "true", "rapid.shrinktime": "1ms"} {
		f := flag.Lookup(name)
		if f == nil {
			t.Fatalf("rapid's -%s flag is not registered", name)
		}
		saved := f.Value.String()
		if err := f.Value.Set(value); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = f.Value.Set(saved) })
	}
}

// The recording suite sees what the suite's tests rely on: a correct log passes through it,
// failures are recorded and end the run, panics are recorded, not raised.
func TestRecordingSuite(t *testing.T) {
	if got := runRecorded(t, func(s suite) { testLog(s, memHarness()) }); got != "" {
		t.Fatalf("MemLog fails in the recording suite: %s", got)
	}
	ran := []string{}
	got := runRecorded(t, func(s suite) {
		s.Run("first", func(s suite) { ran = append(ran, "first"); s.Fatalf("broken") })
		s.Run("second", func(s suite) { ran = append(ran, "second") })
	})
	if !strings.HasSuffix(got, "/first: broken") || len(ran) != 1 {
		t.Fatalf("failure %q after sections %v, want the first's alone", got, ran)
	}
	if got := runRecorded(t, func(s suite) { var m map[string]int; m["x"] = 1 }); !strings.Contains(got, "panic: assignment to entry in nil map") {
		t.Fatalf("a panic recorded as %q", got)
	}
}
