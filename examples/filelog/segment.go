package filelog

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A segment is one file of a partition's log: the records from offset base on, framed one
// after another. Its name is its base offset, zero-padded to 20 digits, so names sort as
// offsets do.
type segment struct {
	base int64
	f    *os.File
	// pos[i] is where the frame of offset base+i starts. The frame ends where the next one
	// starts, or at end for the last one.
	pos []uint32
	end int64 // end of the last frame: the segment's size in use, where an append goes
	// count is how many offsets the segment owns: len(pos) for the active (last) segment,
	// next.base - base for a sealed one. An offset the scan could not delimit (damage in
	// a sealed segment) is owned but has no pos: it reads as corrupt.
	count int64
	dirty bool // written since its last fsync
}

const segmentSuffix = ".log"

func segmentName(base int64) string { return fmt.Sprintf("%020d%s", base, segmentSuffix) }

// parseSegmentName returns the base offset a segment file's name carries, or false for a
// name that is not exactly one segmentName writes.
func parseSegmentName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, segmentSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	base, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || base < 0 {
		return 0, false
	}
	return base, true
}

// scanned is what a scan of a segment file found.
type scanned struct {
	pos []uint32 // start of each frame it could delimit, in order
	end int64    // end of the last delimited frame
	// intact is how many frames there are up to and including the last one that decoded
	// whole (checksum and offset), and intactEnd where that frame ends. A torn tail is what
	// follows it.
	intact    int
	intactEnd int64
}

// scanSegment reads a segment file's frames from the start and delimits them. It stops at
// the end of size, at a frame it cannot delimit (cut short, or a length no frame has), and
// at a frame that decodes whole but carries another offset than its place says (the file is
// not what its name claims). A frame whose checksum fails but whose length stays inside the
// file is delimited: it reads as corrupt if anything intact follows it. Only an I/O error is
// returned as an error.
func scanSegment(r io.ReaderAt, size, base int64) (scanned, error) {
	var s scanned
	br := bufio.NewReaderSize(io.NewSectionReader(r, 0, size), 64<<10)
	buf := make([]byte, 0, 4096)
	for at := int64(0); size-at >= headerSize && at <= math.MaxUint32; {
		buf = buf[:headerSize]
		if _, err := io.ReadFull(br, buf); err != nil {
			return s, ioError(err)
		}
		n, err := frameLen(buf)
		if err != nil || int64(n) > size-at {
			break
		}
		if cap(buf) < n {
			buf = append(make([]byte, 0, n), buf...)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(br, buf[headerSize:]); err != nil {
			return s, ioError(err)
		}
		f, _, err := decodeFrame(buf)
		offset := base + int64(len(s.pos))
		if err == nil && f.offset != offset {
			break
		}
		s.pos = append(s.pos, uint32(at))
		at += int64(n)
		s.end = at
		if err == nil {
			s.intact, s.intactEnd = len(s.pos), at
		}
	}
	return s, nil
}

// ioError keeps a file that shrank under the scan from passing for an I/O error: the scan
// stops where the bytes stop.
func ioError(err error) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil
	}
	return err
}

// openSegment opens and scans the segment file of base in dir. For the active (last)
// segment, a torn tail (everything after the last intact frame) is cut off the file.
func openSegment(dir string, base int64, last bool) (*segment, error) {
	path := filepath.Join(dir, segmentName(base))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	s, err := scanSegment(f, info.Size(), base)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("filelog: scan %s: %w", path, err)
	}
	seg := &segment{base: base, f: f, pos: s.pos, end: s.end}
	if last {
		seg.pos, seg.end = s.pos[:s.intact], s.intactEnd
		if info.Size() > seg.end {
			if err := f.Truncate(seg.end); err != nil {
				f.Close()
				return nil, fmt.Errorf("filelog: cut the torn tail of %s: %w", path, err)
			}
			seg.dirty = true
		}
	}
	seg.count = int64(len(seg.pos))
	return seg, nil
}

// createSegment creates an empty segment file of base in dir.
func createSegment(dir string, base int64) (*segment, error) {
	f, err := os.OpenFile(filepath.Join(dir, segmentName(base)), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return &segment{base: base, f: f}, nil
}

// frameBounds returns where the frame of offset base+i starts and ends, or false when the
// segment owns the offset but could not delimit its frame.
func (s *segment) frameBounds(i int64) (start, end int64, ok bool) {
	if i >= int64(len(s.pos)) {
		return 0, 0, false
	}
	start = int64(s.pos[i])
	if i+1 < int64(len(s.pos)) {
		return start, int64(s.pos[i+1]), true
	}
	return start, s.end, true
}

// SyncDir makes the entries of dir (created, renamed and removed files) durable: what a
// writer of its own files beside the log (a host's catalogue, say) syncs after a rename.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
