package routertest

import (
	"testing"

	"narad.dev/consume/router"
)

// rangeLog is a MemLog with a ReadRange built on Read instead of its own: a second way to
// keep the router.RangeReader contract.
type rangeLog struct{ memLogUnderTest }

var _ router.RangeReader = (*rangeLog)(nil)

func (l *rangeLog) ReadRange(offset int64, max, maxBytes int, dst []router.Record) ([]router.Record, error) {
	return rangeByRead(l, offset, max, maxBytes, dst)
}

// rangeByRead reads a range one Read at a time, as a host's first ReadRange might: the
// records from offset on, at most max, below the high watermark, up to the one that brings
// the keys, values and headers to maxBytes, ending before a later record that fails.
func rangeByRead(l router.Log, offset int64, max, maxBytes int, dst []router.Record) ([]router.Record, error) {
	hwm := l.HighWatermark()
	total := 0
	for k := int64(0); k < int64(max) && offset+k < hwm && (k == 0 || total < maxBytes); k++ {
		rec, err := l.Read(offset + k)
		if err != nil {
			if k == 0 {
				return dst, err
			}
			break
		}
		total += rec.PayloadBytes()
		dst = append(dst, rec)
	}
	return dst, nil
}

// A log with a ReadRange built on Read passes the whole suite, its range section included.
func TestRangeReaderConformance(t *testing.T) {
	TestLog(t, LogHarness{
		New:     func(*testing.T) LogUnderTest { return &rangeLog{memLogUnderTest{NewMemLog()}} },
		Trim:    func(l LogUnderTest, oldest int64) error { l.(*rangeLog).Trim(oldest); return nil },
		Corrupt: func(l LogUnderTest, off int64) error { l.(*rangeLog).Corrupt(off); return nil },
		Close:   func(l LogUnderTest) error { l.(*rangeLog).Close(); return nil },
	})
}
