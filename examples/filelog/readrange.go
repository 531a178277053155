package filelog

import (
	"fmt"
	"sort"

	"narad.dev/consume/router"
)

var _ router.RangeReader = (*Log)(nil)

// ReadRange implements router.RangeReader: it appends to dst the records at offset,
// offset+1, ... and returns it, reading them with one pread of their frames and checking
// each frame's checksum and offset.
//
// The range holds at most maxRecords records (fewer than 1 count as 1) and stops at the high
// watermark, at the end of the segment that holds offset (the next call reads on from
// the next segment), and after the record whose key and value bring the range's total to
// maxBytes or more (that record is kept). The first record's errors are Read's:
// router.ErrNotFound below Oldest, ErrOutOfRange at or past the high watermark,
// router.ErrCorrupt (wrapped) for a damaged frame, router.ErrLogClosed once closed, and a
// wrapped I/O error; dst comes back unchanged with them. A later record whose frame is
// damaged ends the range before it, with a nil error, so that Read reports it on its own.
//
// The records' keys and values share one buffer per call, each capped to its own length;
// they belong to the caller.
func (l *Log) ReadRange(offset int64, maxRecords, maxBytes int, dst []router.Record) ([]router.Record, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	hwm := l.hwm.Load()
	switch {
	case l.closed:
		return dst, router.ErrLogClosed
	case offset < l.oldest.Load():
		return dst, router.ErrNotFound
	case offset >= hwm:
		return dst, ErrOutOfRange
	}
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset }) - 1
	seg := l.segs[i]
	first := offset - seg.base
	start, end, ok := seg.frameBounds(first)
	if !ok {
		return dst, l.corrupt(offset, errShortFrame)
	}
	// The frames to read: from the pos index alone, before any byte is read. A frame's
	// key and value are its size less the fixed part; a damaged frame whose size says
	// otherwise fails its decode below and ends the range there.
	n := int64(1)
	bytes := int(end-start) - minFrameSize
	limit := min(int64(max(maxRecords, 1)), hwm-offset)
	for n < limit && bytes < maxBytes {
		_, e, ok := seg.frameBounds(first + n)
		if !ok {
			break // the segment ends here, or its frames cannot be delimited past here
		}
		bytes += int(e-end) - minFrameSize
		end = e
		n++
	}
	buf := make([]byte, end-start)
	if _, err := seg.f.ReadAt(buf, start); err != nil {
		return dst, fmt.Errorf("filelog: read offsets %d to %d in %s: %w", offset, offset+n-1, l.dir, err)
	}
	at := int64(0)
	for k := range n {
		fs, fe, _ := seg.frameBounds(first + k)
		size := fe - fs
		f, got, err := decodeFrame(buf[at : at+size])
		if err == nil && (int64(got) != size || f.offset != offset+k) {
			err = errBadLength
		}
		if err != nil {
			if k == 0 {
				return dst, l.corrupt(offset, err)
			}
			break
		}
		at += size
		rec := router.Record{Value: f.value[:len(f.value):len(f.value)], Timestamp: timestamp(f.ts)}
		if len(f.key) > 0 {
			rec.Key = f.key
		}
		dst = append(dst, rec)
	}
	return dst, nil
}
