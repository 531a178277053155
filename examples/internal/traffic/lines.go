package traffic

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// Lines writes a run's output whole lines at a time, from any goroutine: as they are, or
// stamped with the seconds since the run's start.
type Lines struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
}

// NewLines writes to out.
func NewLines(out io.Writer) *Lines { return &Lines{out: out} }

// SetStart sets the moment the stamps count from.
func (l *Lines) SetStart(t time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.start = t
}

// Start returns the moment the stamps count from.
func (l *Lines) Start() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.start
}

// Since is t in seconds since the start, as the stamps count it.
func (l *Lines) Since(t time.Time) float64 { return t.Sub(l.Start()).Seconds() }

// Say writes a line stamped with the time since the start.
func (l *Lines) Say(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.out, "%5.1fs  %s\n", time.Since(l.start).Seconds(), fmt.Sprintf(format, args...))
}

// Print writes a line as it is.
func (l *Lines) Print(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.out, format+"\n", args...)
}
