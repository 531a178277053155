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
// the next segment), and after the record whose key, value and headers bring the range's
// total to maxBytes or more (that record is kept: router.Record.PayloadBytes). The first record's errors are Read's:
// router.ErrNotFound below Oldest, ErrOutOfRange at or past the high watermark,
// router.ErrCorrupt (wrapped) for a damaged frame, router.ErrLogClosed once closed, and a
// wrapped I/O error; dst comes back unchanged with them. A later record whose frame is
// damaged ends the range before it, with a nil error, so that Read reports it on its own.
//
// The records' keys, values and header values share a buffer per pread (one for a range of
// records without headers), each capped to its own length; they belong to the caller.
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
	limit := min(int64(max(maxRecords, 1)), hwm-offset)
	first := offset - seg.base
	if _, _, ok := seg.frameBounds(first); !ok {
		return dst, l.corrupt(offset, errShortFrame)
	}
	// Read in chunks, each one pread of the frames the pos index says a chunk may take
	// before any byte is read: a frame's size less its fixed part is at least what its
	// record counts (its headers' lengths are the difference), so a chunk never reads past
	// the record that crosses maxBytes, and the next chunk reads on from its end while the
	// records read fall short of the bound. A record without headers counts exactly its
	// frame's bytes, so a range of them is one chunk. A damaged frame whose size says
	// otherwise fails its decode below and ends the range there.
	total, n := 0, int64(0)
	for n < limit && (n == 0 || total < maxBytes) {
		start, end, ok := seg.frameBounds(first + n)
		if !ok {
			break // the segment ends here, or its frames cannot be delimited past here
		}
		count, bytes := int64(1), total+int(end-start)-minFrameSize
		for n+count < limit && bytes < maxBytes {
			_, e, ok := seg.frameBounds(first + n + count)
			if !ok {
				break
			}
			bytes += int(e-end) - minFrameSize
			end = e
			count++
		}
		buf := make([]byte, end-start)
		if _, err := seg.f.ReadAt(buf, start); err != nil {
			if n == 0 {
				return dst, fmt.Errorf("filelog: read offsets %d to %d in %s: %w", offset, offset+count-1, l.dir, err)
			}
			break // the records read stand; Read reports the failure on its own
		}
		at := int64(0)
		for k := range count {
			fs, fe, _ := seg.frameBounds(first + n + k)
			size := fe - fs
			f, got, err := decodeFrame(buf[at : at+size])
			if err == nil && (int64(got) != size || f.offset != offset+n+k) {
				err = errBadLength
			}
			if err != nil {
				if n+k == 0 {
					return dst, l.corrupt(offset, err)
				}
				return dst, nil
			}
			at += size
			rec := f.record()
			dst = append(dst, rec)
			if total += rec.PayloadBytes(); total >= maxBytes && k < count-1 {
				return dst, nil // never past the record that crosses the bound
			}
		}
		n += count
	}
	return dst, nil
}
