package filelog

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// conformanceLog adapts a Log to the library's conformance suite.
type conformanceLog struct{ *Log }

var _ routertest.RecordAppender = conformanceLog{}

func (c conformanceLog) Append(key, value []byte) (int64, error) {
	return c.Log.Append(key, value, time.Time{})
}

// AppendRecord appends with headers and a timestamp: the suite checks the log keeps both.
func (c conformanceLog) AppendRecord(rec router.Record) (int64, error) {
	return c.Log.AppendRecord(rec)
}

// The file log keeps the router.Log contract: the library's conformance suite, run as any
// host would run it against its own log.
func TestConformance(t *testing.T) {
	routertest.TestLog(t, routertest.LogHarness{
		New: func(t *testing.T) routertest.LogUnderTest {
			return conformanceLog{openTestLog(t, "", Options{SegmentBytes: 256})}
		},
		Trim: func(l routertest.LogUnderTest, oldest int64) error {
			return trimBelow(l.(conformanceLog).Log, oldest)
		},
		Corrupt: func(l routertest.LogUnderTest, offset int64) error {
			return corruptRecord(l.(conformanceLog).Log, offset)
		},
		Close: func(l routertest.LogUnderTest) error { return l.(conformanceLog).Close() },
	})
}

// trimBelow applies retention as far as whole segments allow: every segment whose records all
// lie below oldest goes.
func trimBelow(l *Log, oldest int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	below := 0
	for below+1 < len(l.segs) && l.segs[below+1].base <= oldest {
		below++
	}
	if below == 0 {
		return nil
	}
	saved := l.opts.MaxSegments
	l.opts.MaxSegments = len(l.segs) - below
	defer func() { l.opts.MaxSegments = saved }()
	return l.enforceRetention()
}

// corruptRecord flips a byte inside the frame of offset on disk, as a bit flip would.
func corruptRecord(l *Log, offset int64) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for i := len(l.segs) - 1; i >= 0; i-- {
		seg := l.segs[i]
		if offset < seg.base {
			continue
		}
		start, end, ok := seg.frameBounds(offset - seg.base)
		if !ok {
			return fmt.Errorf("no frame for offset %d", offset)
		}
		f, err := os.OpenFile(filepath.Join(l.dir, segmentName(seg.base)), os.O_RDWR, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		at := end - 1 // the last byte of the value
		if at < start {
			return fmt.Errorf("empty frame for offset %d", offset)
		}
		var b [1]byte
		if _, err := f.ReadAt(b[:], at); err != nil {
			return err
		}
		b[0] ^= 0xff
		_, err = f.WriteAt(b[:], at)
		return err
	}
	return fmt.Errorf("offset %d below the log", offset)
}
