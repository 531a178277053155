package offsets

import (
	"errors"
	"io"
	"os"
)

// State is a partition's persisted state, as recovery reads it.
type State struct {
	// Found is false when neither file holds a valid frontier (both missing, or unusable):
	// the host then starts the partition as new, at its oldest retained offset minus one.
	Found bool
	// Frontier is the inclusive committed frontier: the larger of the newest valid slot's and
	// consumer.offset's (checklist items 73, 75). -1 when !Found.
	Frontier int64
	// Ahead holds the newest valid slot's acked-ahead offsets above Frontier, ascending.
	Ahead []int64
	// Attempts holds the newest valid slot's delivery attempts of offsets above Frontier
	// that are not acked ahead, ascending by offset.
	Attempts []Attempt
	// Quarantine holds the newest valid slot's quarantined offsets, ascending, as written:
	// on either side of Frontier.
	Quarantine []int64
	// Requeued holds the newest valid slot's requeued offsets, ascending, each at or below
	// Frontier: quarantined offsets the frontier passed that an operator requeued and that
	// wait to be delivered again.
	Requeued []int64
}

// recoveryNotes says what recovery had to ignore, for the log.
type recoveryNotes struct {
	foreignSlots int  // valid records of another partition
	badOffset    bool // consumer.offset present but not 8 bytes holding a frontier >= -1
}

// Recover is recovery as a pure function: the partition's state from the raw bytes of its
// consumer.ahead (any length; nil when missing) and consumer.offset (nil when missing). It takes
// the newest slot whose checksum is valid and that belongs to the partition, and the larger of
// its frontier and consumer.offset's (checklist items 73 to 75); the slot's acked-ahead offsets
// and attempts at or below that frontier are settled and dropped, and so are attempts of
// offsets acked ahead; its quarantine is returned as written and its requeued offsets at or
// below the frontier (all of them, since a record's requeued offsets never pass its own
// frontier). Every set comes from the one slot chosen, never a mix of the two. Short files are read as far as they go (a
// move's copy carries slot 0 only). A record from a newer release makes it fail with an error
// matching ErrNewerSlot rather than guess. It never panics.
func Recover(topic string, partition int32, aheadFile, offsetFile []byte) (State, error) {
	st, _, err := recoverState(PartitionKey(topic, partition), aheadFile, offsetFile)
	return st, err
}

func recoverState(key uint32, aheadFile, offsetFile []byte) (State, recoveryNotes, error) {
	var notes recoveryNotes
	var recs [2]Record
	var valid [2]bool
	for i := range recs {
		if len(aheadFile) < (i+1)*SlotSize {
			break
		}
		err := DecodeSlot(aheadFile[i*SlotSize:(i+1)*SlotSize], &recs[i])
		if errors.Is(err, ErrNewerSlot) {
			return State{Frontier: -1}, notes, err
		}
		if err == nil && recs[i].Key != key {
			notes.foreignSlots++
			continue
		}
		valid[i] = err == nil
	}
	st := State{Frontier: -1}
	if n := newestSlot(valid, &recs); n >= 0 {
		r := &recs[n]
		st = State{Found: true, Frontier: r.Frontier, Ahead: r.Ahead, Attempts: r.Attempts,
			Quarantine: r.Quarantine, Requeued: r.Requeued}
	}
	if offsetFile != nil {
		v, ok := decodeOffset(offsetFile)
		switch {
		case !ok:
			notes.badOffset = true
		case !st.Found || v > st.Frontier:
			st.Found, st.Frontier = true, v
		}
	}
	st.Ahead = above(st.Ahead, st.Frontier)
	st.Attempts = unresolved(st.Attempts, st.Frontier, st.Ahead)
	st.Requeued = atOrBelow(st.Requeued, st.Frontier)
	return st, notes, nil
}

// unresolved keeps, in place, the attempts of offsets above frontier that are not in ahead
// (both ascending).
func unresolved(as []Attempt, frontier int64, ahead []int64) []Attempt {
	out, i := as[:0], 0
	for _, a := range as {
		if a.Offset <= frontier {
			continue
		}
		for i < len(ahead) && ahead[i] < a.Offset {
			i++
		}
		if i < len(ahead) && ahead[i] == a.Offset {
			continue
		}
		out = append(out, a)
	}
	return out
}

// atOrBelow drops the trailing offsets above frontier, in place.
func atOrBelow(offs []int64, frontier int64) []int64 {
	n := len(offs)
	for n > 0 && offs[n-1] > frontier {
		n--
	}
	return offs[:n]
}

// above drops the leading offsets at or below frontier, in place.
func above(ahead []int64, frontier int64) []int64 {
	i := 0
	for i < len(ahead) && ahead[i] <= frontier {
		i++
	}
	if i == 0 {
		return ahead
	}
	n := copy(ahead, ahead[i:])
	return ahead[:n]
}

// Load reads the partition's files by path, the way recovery does (see Recover), for a shard
// being created, a partition being moved, or the token estimate of a partition not loaded
// (checklist items 73, 75, 99). A missing directory or files mean no state (State.Found false),
// not an error; a read error is an error, so the host retries rather than start the partition
// over. Load takes no lock of the committer and may run beside a tick.
//
// A host creating a shard from the result passes it through ClampToWatermark (gap G1), installs
// the shard, and then calls MarkDirty for the partition. What Load read may sit only in the page
// cache (a process crash before its writeout); the tick that follows primes the partition,
// which makes it durable, and writes the shard's state out, so a power loss cannot take back
// what the restart observed even if the partition is never acked again (invariant I3), and a
// clamped frontier replaces the bad one in both files.
func (c *Committer) Load(topic string, partition int32) (State, error) {
	aheadFile, offsetFile, err := readStateFiles(c.fs, c.dir(topic, partition))
	if err != nil {
		return State{Frontier: -1}, &PartitionError{Topic: topic, Partition: partition, Op: "load", Err: err}
	}
	st, notes, err := recoverState(PartitionKey(topic, partition), aheadFile, offsetFile)
	if err != nil {
		return st, &PartitionError{Topic: topic, Partition: partition, Op: "load", Err: err}
	}
	if notes.foreignSlots > 0 || notes.badOffset {
		c.log.Warn(msgIgnored, "topic", topic, "partition", partition,
			"foreign_slots", notes.foreignSlots, "bad_consumer_offset", notes.badOffset)
	}
	return st, nil
}

// readStateFiles reads consumer.ahead (up to AheadFileSize bytes) and consumer.offset (up to one
// byte more than it should hold, so a longer file shows as such) from dir; a missing directory
// or file reads as nil.
func readStateFiles(fsys FS, dir string) (aheadFile, offsetFile []byte, err error) {
	root, err := fsys.OpenRoot(dir)
	if gone(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	defer root.Close()
	if aheadFile, err = readPrefix(root, AheadFile, AheadFileSize); err != nil {
		return nil, nil, err
	}
	if offsetFile, err = readPrefix(root, OffsetFile, OffsetFileSize+1); err != nil {
		return nil, nil, err
	}
	return aheadFile, offsetFile, nil
}

// readPrefix reads at most limit bytes of name; nil when it does not exist.
func readPrefix(root Root, name string, limit int64) ([]byte, error) {
	f, err := root.OpenFile(name, os.O_RDONLY, 0)
	if gone(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, min(fi.Size(), limit))
	n, err := f.ReadAt(b, 0)
	if n == len(b) {
		return b, nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return nil, err
}

// ClampToWatermark guards against a frontier the log cannot have: consumer.offset carries no
// checksum and recovery takes the larger frontier, so a torn or bit-flipped file could move the
// frontier past records never acked (gap G1). A frontier at or above hwm (the next offset to be
// written) is clamped to hwm-1; offsets at or above hwm are dropped from every set (acked-ahead,
// attempts, quarantine, requeued: no such record exists), and both are logged loudly and
// counted. The host calls it on every load.
func (c *Committer) ClampToWatermark(topic string, partition int32, st State, hwm int64) State {
	clamped, d := clampState(st, hwm)
	if clamped.Frontier != st.Frontier || d != (clampDrops{}) {
		c.stats.clamps.Add(1)
		c.log.Error(msgClamped, "topic", topic, "partition", partition, "frontier", st.Frontier,
			"high_watermark", hwm, "clamped_to", clamped.Frontier, "dropped_ahead", d.ahead,
			"dropped_attempts", d.attempts, "dropped_quarantine", d.quarantine,
			"dropped_requeued", d.requeued)
	}
	return clamped
}

// clampDrops counts what clampState dropped from each set.
type clampDrops struct{ ahead, attempts, quarantine, requeued int }

// clampState is ClampToWatermark's arithmetic. It copies nothing: the result shares st's
// slices.
func clampState(st State, hwm int64) (State, clampDrops) {
	var d clampDrops
	if !st.Found {
		return st, d
	}
	if st.Frontier > hwm-1 {
		st.Frontier = hwm - 1
	}
	st.Ahead, d.ahead = below(st.Ahead, hwm)
	st.Quarantine, d.quarantine = below(st.Quarantine, hwm)
	st.Requeued, d.requeued = below(st.Requeued, hwm) // at or below the clamped frontier, then
	n := len(st.Attempts)
	for n > 0 && st.Attempts[n-1].Offset >= hwm {
		n--
	}
	st.Attempts, d.attempts = st.Attempts[:n], len(st.Attempts)-n
	return st, d
}

// below cuts the trailing offsets at or above hwm and says how many it cut.
func below(offs []int64, hwm int64) ([]int64, int) {
	n := len(offs)
	for n > 0 && offs[n-1] >= hwm {
		n--
	}
	return offs[:n], len(offs) - n
}
