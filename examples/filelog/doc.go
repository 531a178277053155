// Package filelog is a small segmented file log, written for the examples of
// narad.dev/consume: the log an in-process durable queue embeds by default, and a worked
// example of what a host's log owes the library (the contract on router.Log).
//
// # Usage
//
// A Store keeps topics of partitions in a directory, and is at once the router.Logs, the
// router.ManyGetter and the router.Routes of a single node:
//
//	var node *router.Node
//	store, err := filelog.Open(dir, filelog.Options{
//		OnAppend: func(topic string, p int32, hwm int64) { node.Appended(topic, p, hwm) },
//	})
//	...
//	err = store.CreateTopic("orders", 4)
//	node, err = router.New(router.Config{Logs: store, Routes: store, Dir: stateDir})
//	...
//	offset, err := store.Append("orders", 0, key, value)
//	...
//	node.Close()  // first: it reads the store
//	store.Close()
//
// # Layout
//
// Each partition is a directory, Dir/<topic, path-escaped>/<partition>/, of segment files
// named by the offset of their first record (00000000000000000000.log, ...). Appends go to
// the last segment; once it would grow past Options.SegmentBytes a new one starts at the
// high watermark. Each record is one frame: its length, a CRC32-C of the frame, its offset,
// a timestamp, its key, its headers if it has some, and its value (see frame.go for the
// bytes). A frame without headers is byte for byte the frame of the release before headers,
// so segments it wrote read as before; that release reads a frame with headers as damaged.
// Store.AppendRecord and Log.AppendRecord append a record with its headers, which Read and
// ReadRange return in order (router.Record.Headers).
//
// # The router.Log contract
//
//   - Read(off) for Oldest() <= off < HighWatermark() returns the record, or a wrapped
//     router.ErrCorrupt when its frame fails its checksum or could not be found in a
//     damaged segment; the bytes do not change, so it answers the same every time.
//   - Read below Oldest() returns router.ErrNotFound: retention removed it.
//   - After Close (of the Log or the Store), Read and Append return router.ErrLogClosed,
//     while HighWatermark and Oldest still answer.
//   - HighWatermark and Oldest never decrease while the log is open, and Oldest <=
//     HighWatermark.
//   - Read at or past the high watermark returns ErrOutOfRange (the node never asks).
//
// A Log is also a router.RangeReader: ReadRange reads consecutive records of one segment
// with a single pread (records with headers may take a few: their frames' length fields are
// not counted in maxBytes, so the pos index alone cannot say where the bound falls), checks
// each frame as Read does, and ends the range before a damaged frame (an error only when
// the first one is damaged).
//
// # Durability and recovery
//
// With SyncNone (the default) an append is a write to the page cache: it survives a crash of
// the process (kill -9) but not a power loss; Sync and Close fsync. With SyncEveryAppend each
// append is fsynced before it returns, and no reader sees it before then. Concurrent appends
// to a partition share fsyncs (group commit): each writes its frame, then waits for an
// fsync begun after its write, which one of them runs for all while the others write on. A
// failed fsync takes back every record not yet durable and fails them and every later
// append, since the page cache is no longer to be trusted. An fsync is a partition's, so
// appends spread over partitions do not share one: Store.AppendAny, for records whose order
// across partitions matters to no one, appends to a partition whose appends await an fsync,
// so that concurrent appends to a topic share fsyncs, within a few dozen records of keeping
// the topic's partitions even.
//
// Opening a log scans its segment files to index the frames (4 bytes of memory per record).
// In the last segment, everything after the last intact frame is a torn tail, the remains of
// an append a crash interrupted: it is cut off the file, and the high watermark is the offset
// after the last intact record. A damaged frame before an intact one stays, and reads as
// corrupt. In an older segment a damaged frame reads as corrupt, and so do all of the
// segment's offsets after a frame whose length is damaged (the next segment's name says how
// many there are). Files whose names are not segment names are left alone; no file, however
// damaged, makes the package panic.
//
// # Retention
//
// Retention removes whole segments, oldest first, while a partition has more than
// Options.MaxSegments segments or more than Options.MaxBytes bytes, so Oldest moves up a
// segment at a time. It runs when a log opens and at each append. The segment being
// appended to is never removed.
//
// # Limits
//
// It is a log for examples and tests, not a broker's: one process at a time per directory
// (nothing locks it), every segment file stays open, the index lives in memory, an append
// holds the partition's lock for its write (not for its fsync), and topics are not deleted.
package filelog
