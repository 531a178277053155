package filelog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"pgregory.net/rapid"

	"narad.dev/consume/router"
)

// logModel is what a log should hold, kept the simplest way: every record ever appended,
// and the segments as (base, bytes) pairs, from which retention is predicted.
type logModel struct {
	records []modelRecord // records[off]
	segs    []modelSegment
	opts    Options
}

type modelRecord struct {
	key, value []byte
	ts         time.Time
}

type modelSegment struct {
	base  int64
	bytes int64
}

func (m *logModel) hwm() int64    { return int64(len(m.records)) }
func (m *logModel) oldest() int64 { return m.segs[0].base }

func (m *logModel) totalBytes() int64 {
	var n int64
	for _, s := range m.segs {
		n += s.bytes
	}
	return n
}

// retain drops the oldest segments while over the limits, as the package documents.
func (m *logModel) retain() {
	for len(m.segs) > 1 && (m.opts.MaxSegments > 0 && len(m.segs) > m.opts.MaxSegments ||
		m.opts.MaxBytes > 0 && m.totalBytes() > m.opts.MaxBytes) {
		m.segs = m.segs[1:]
	}
}

func (m *logModel) append(r modelRecord) int64 {
	size := int64(frameSize(r.key, r.value, nil))
	if last := &m.segs[len(m.segs)-1]; last.bytes > 0 && last.bytes+size > m.opts.SegmentBytes {
		m.segs = append(m.segs, modelSegment{base: m.hwm()})
	}
	m.retain()
	m.segs[len(m.segs)-1].bytes += size
	m.records = append(m.records, r)
	return m.hwm() - 1
}

// TestLogAgainstModel appends, reads, reopens (with and without a torn tail, with other
// retention limits) and checks every answer against the model.
func TestLogAgainstModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		dir, err := os.MkdirTemp("", "filelog-model-")
		if err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(dir)
		genOpts := func(t *rapid.T) Options {
			return Options{
				SegmentBytes: rapid.Int64Range(minFrameSize, 400).Draw(t, "segmentBytes"),
				MaxSegments:  rapid.IntRange(0, 4).Draw(t, "maxSegments"),
				MaxBytes:     rapid.SampledFrom([]int64{0, 100, 300, 1000}).Draw(t, "maxBytes"),
			}
		}
		m := &logModel{opts: genOpts(t), segs: []modelSegment{{}}}
		// open opens the log; retention applies at open, so the model retains too.
		open := func() *Log {
			m.retain()
			opts, err := m.opts.withDefaults()
			if err != nil {
				t.Fatal(err)
			}
			l, err := openLog(dir, opts, nil)
			if err != nil {
				t.Fatalf("open: %v", err)
			}
			return l
		}
		l := open()
		defer func() { l.Close() }()
		now := time.Unix(1_700_000_000, 0)

		t.Repeat(map[string]func(*rapid.T){
			"append": func(t *rapid.T) {
				r := modelRecord{
					key:   rapid.SliceOfN(rapid.Byte(), 0, 8).Draw(t, "key"),
					value: rapid.SliceOfN(rapid.Byte(), 0, 120).Draw(t, "value"),
				}
				if rapid.Bool().Draw(t, "stamped") {
					now = now.Add(time.Millisecond)
					r.ts = now
				}
				off, err := l.Append(r.key, r.value, r.ts)
				if err != nil {
					t.Fatalf("append: %v", err)
				}
				if want := m.append(r); off != want {
					t.Fatalf("appended at %d, model says %d", off, want)
				}
			},
			"read": func(t *rapid.T) {
				off := rapid.Int64Range(m.oldest()-2, m.hwm()+1).Draw(t, "offset")
				rec, err := l.Read(off)
				switch {
				case off < m.oldest():
					if !errors.Is(err, router.ErrNotFound) {
						t.Fatalf("read %d below %d: %v", off, m.oldest(), err)
					}
				case off >= m.hwm():
					if !errors.Is(err, ErrOutOfRange) {
						t.Fatalf("read %d at or past %d: %v", off, m.hwm(), err)
					}
				default:
					want := m.records[off]
					switch {
					case err != nil:
						t.Fatalf("read %d: %v", off, err)
					case string(rec.Key) != string(want.key) || string(rec.Value) != string(want.value):
						t.Fatalf("read %d: %q=%q, want %q=%q", off, rec.Key, rec.Value, want.key, want.value)
					case !rec.Timestamp.Equal(want.ts):
						t.Fatalf("read %d: timestamp %v, want %v", off, rec.Timestamp, want.ts)
					}
				}
			},
			"reopen": func(t *rapid.T) {
				if err := l.Close(); err != nil {
					t.Fatal(err)
				}
				if rapid.Bool().Draw(t, "newLimits") {
					m.opts = genOpts(t)
				}
				l = open()
			},
			"crash with a torn tail": func(t *rapid.T) {
				// The process dies in the middle of writing a frame: what reached the file
				// is a prefix of a frame, or junk. Either way it is cut on open.
				torn := appendFrame(nil, m.hwm(), now, []byte("torn"), []byte("frame"), nil)
				tail := rapid.SampledFrom([][]byte{
					torn[:rapid.IntRange(1, len(torn)-1).Draw(t, "cut")],
					rapid.SliceOfN(rapid.Byte(), 1, 50).Draw(t, "junk"),
					make([]byte, 30),
				}).Draw(t, "tail")
				l.closeFiles() // no sync, no flag: as if the process died
				last := m.segs[len(m.segs)-1].base
				f, err := os.OpenFile(filepath.Join(dir, segmentName(last)), os.O_WRONLY|os.O_APPEND, 0)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := f.Write(tail); err != nil {
					t.Fatal(err)
				}
				f.Close()
				l = open()
			},
		})
		if l.HighWatermark() != m.hwm() || l.Oldest() != m.oldest() {
			t.Fatalf("bounds [%d, %d), model [%d, %d)", l.Oldest(), l.HighWatermark(), m.oldest(), m.hwm())
		}
	})
}
