package offsets

import (
	"errors"
	"io/fs"
	"strconv"
	"syscall"
)

// ErrClosed is what Tick and Durable answer after Close, and what a Durable wait that Close
// could not make durable fails with.
var ErrClosed = errors.New("offsets: committer closed")

// ErrShardGone is what a Durable wait fails with when its partition is forgotten (Forget), or
// when the tick finds the partition's shard gone (Source answered !ok): there is no live state
// left to make durable. It comes wrapped in a *PartitionError (Op "durable").
var ErrShardGone = errors.New("offsets: partition forgotten or its shard gone")

// ErrStranded is what a Durable wait fails with when its partition is stranded (its directory
// was removed or replaced under the committer; see the package doc): nothing is written for it
// until its next Forget. It comes wrapped in a *PartitionError (Op "durable").
var ErrStranded = errors.New("offsets: partition directory removed or replaced; its acks are not persisted")

// PartitionError is one partition's failure in a Tick, Close or Load: an ordinary error (EIO,
// ENOSPC, ESTALE, a failed sync) that the next tick retries. A partition whose directory is
// gone or replaced is not an error: it is stranded and logged (see the package doc).
type PartitionError struct {
	Topic     string
	Partition int32
	Op        string // "prime", "write window", "write out", "device flush", "level", "reopen", "load", "durable"
	Err       error
}

func (e *PartitionError) Error() string {
	return "offsets: " + e.Op + " " + e.Topic + "/" + strconv.Itoa(int(e.Partition)) + ": " + e.Err.Error()
}

func (e *PartitionError) Unwrap() error { return e.Err }

// errStranded unwinds an operation that stranded its partition; it never reaches the host.
var errStranded = errors.New("offsets: partition stranded")

// errForgotten stops a prime of a partition Forget dropped before it began.
var errForgotten = errors.New("offsets: partition forgotten")

// errReplaced is the cause recorded when a path names another directory or file than the one
// pinned or primed.
var errReplaced = errors.New("path names another file than the one primed")

// gone reports whether err says the path no longer names anything of the kind it named: the
// only stat outcome besides a changed identity that strands a partition.
// ENOTDIR is a path component replaced by a file.
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}
