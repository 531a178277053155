package offsets

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// State is a partition's persisted state, as recovery reads it.
type State struct {
	// Found is false when no file holds a trusted frontier (all missing, damaged or foreign):
	// the host then starts the partition as new, at its oldest retained offset minus one.
	Found bool
	// Frontier is the inclusive committed frontier: the larger of the newest valid slot's and
	// consumer.offset's. -1 when !Found.
	Frontier int64
	// Ahead holds the newest valid slot's acked-ahead offsets above Frontier, as runs of
	// consecutive offsets, ascending and maximal. A Source may hand runs that touch; the
	// committer joins them.
	Ahead []Run
	// KeyTails names, on an ordered topic, the offsets of Ahead that are not settled: every
	// record of key KeyTails[i].Key (a stable 64-bit identity of the record's key, never 0)
	// at or above KeyTails[i].From that Ahead holds is unsettled, parked behind a blocked
	// key. At most MaxKeyTails, ascending by From, each From above Frontier, no two with the
	// same Key. A Source hands the shard's over, and the committer writes them into every
	// record (version 2, which older releases refuse); recovery gives the newest valid
	// slot's back. A host that cannot honour them must refuse the state, never drop them:
	// without them the parked records would read as acked, and be skipped.
	KeyTails []KeyTail
	// Attempts holds the newest valid slot's delivery attempts of offsets above Frontier
	// that are not acked ahead, ascending by offset.
	Attempts []Attempt
	// OmittedAttempts is set by a Source only: how many attempts of offsets above the last
	// of Attempts it left out, since no slot could hold them (see MaxSlotAttempts). They are
	// counted as dropped, as the slot's own overflow is.
	OmittedAttempts int
	// Quarantine holds the newest valid slot's quarantined offsets, ascending, as written:
	// on either side of Frontier.
	Quarantine []int64
	// Requeued holds the newest valid slot's requeued offsets, ascending, each at or below
	// Frontier: quarantined offsets the frontier passed that an operator requeued and that
	// wait to be delivered again.
	Requeued []int64
	// Incarnation names the incarnation of the partition's state: the one consumer.id holds,
	// or a fresh one when it holds none that can be trusted (the files, if any, were then
	// ignored). Load always sets it; the host keeps it with the shard and hands it back to the
	// committer through Source, which writes it into every record (see consumer.id).
	Incarnation uint64
	// HostIncarnation is the host's incarnation of the topic the state is bound to (a Kafka
	// topic ID, a table's row version, as the host's router digests it; never 0 when set):
	// consumer.id's, 0 when the state is unbound (written before the binding, or under a
	// host that names none). LoadBound sets it to the host's when the host names one. The
	// host keeps it with the shard and hands it back through Source, as Incarnation, and the
	// prime binds consumer.id to it (see consumer.id).
	HostIncarnation uint64
	// Fence and Epoch are the latest fencing token the partition's shard granted and the
	// ownership epoch it served under, for a committer whose encoding carries them (a host's
	// store, see internal/storecommit). The files of this package do not keep them: Load
	// leaves them zero.
	Fence, Epoch uint64
	// Unverified is true when Frontier comes from a consumer.offset of the legacy 8-byte form,
	// which carries no checksum and no identity: ClampToWatermark then takes a frontier at or
	// above the high watermark for damage rather than a lost tail.
	Unverified bool
}

// recoveryNotes says what recovery had to ignore, for the log and the counters, and what it
// made of consumer.offset, for Inspect.
type recoveryNotes struct {
	Ignored
	offset OffsetUse
}

// stateFiles are the raw bytes of a partition's three files; nil when missing.
type stateFiles struct {
	id, ahead, offset []byte
}

// Recover is recovery as a pure function: the partition's state from the raw bytes of its
// consumer.id, consumer.ahead (any length) and consumer.offset, each nil when missing. It
// reads what the files can be trusted to say, and when in doubt it lets records be delivered
// again rather than skip them (see docs/protocol.md, "Recovery"):
//
//   - consumer.id names the incarnation. Without a valid one (missing: the files were copied
//     or restored without it; damaged: torn by a crash before its first sync, or bit rot),
//     the records that name an incarnation cannot be trusted and are ignored, and only the
//     legacy records of an older release, which name none, are used.
//   - A slot counts when its checksum holds, it belongs to the partition and it names the
//     incarnation. A legacy slot counts without a valid consumer.id, and under one only when
//     it is the record the incarnation adopted at its upgrade (consumer.id says which): where
//     consumer.id and a slot disagree, the slot does not win. The newest counting slot gives
//     every set.
//   - consumer.offset counts when it verifies for the partition and the incarnation; then the
//     larger of its frontier and the slot's is taken. The legacy 8-byte form counts only when
//     no slot does, and under a valid consumer.id only when its incarnation adopted legacy
//     state and the frontier is no newer than the one adopted; its frontier is marked
//     Unverified.
//
// The slot's acked-ahead offsets and attempts at or below the recovered frontier are settled
// and dropped, and so are attempts of offsets acked ahead; its quarantine is returned as
// written and its requeued offsets at or below the frontier. Short files are read as far as
// they go (an older release's holds two slots; a move's copy may carry slot 0 only). A
// record from a newer release makes it fail with an error matching ErrNewerSlot rather than
// guess. It never panics. State.Incarnation is consumer.id's, or 0 when there is none to
// trust (Load draws a fresh one), and State.HostIncarnation the host incarnation consumer.id
// is bound to (Recover knows none to compare it with: LoadBound does).
func Recover(topic string, partition int32, idFile, aheadFile, offsetFile []byte) (State, error) {
	st, _, err := recoverState(PartitionKey(topic, partition), stateFiles{idFile, aheadFile, offsetFile})
	return st, err
}

func recoverState(key uint32, files stateFiles) (State, recoveryNotes, error) {
	var notes recoveryNotes
	st := State{Frontier: -1}
	var id identity
	if files.id != nil {
		var err error
		if id, err = decodeID(files.id, key); err != nil {
			notes.ConsumerID = err.Error()
		}
	}
	var slots [AheadSlots]decodedSlot
	for i := range slots {
		slots[i].err = errShort // until read whole
	}
	present := 0
	for i := range slots {
		lo, hi := i*SlotSize, (i+1)*SlotSize
		if len(files.ahead) <= lo {
			break
		}
		present++
		if len(files.ahead) < hi {
			notes.DamagedSlots++ // a torn or truncated file: a partial slot
			break
		}
		slots[i].decode(files.ahead[lo:hi])
		switch err := slots[i].err; {
		case errors.Is(err, ErrNewerSlot):
			return State{Frontier: -1}, notes, err
		case errors.Is(err, errBlank):
			present--
		case err != nil:
			notes.DamagedSlots++
		}
	}
	n, foreign, legacyPassed := chooseSlot(&slots, key, id)
	notes.ForeignSlots, notes.LegacyUnderIncarnation = foreign, legacyPassed
	if n >= 0 {
		r := &slots[n].rec
		st = State{Found: true, Frontier: r.Frontier, Ahead: r.Ahead, Attempts: r.Attempts,
			Quarantine: r.Quarantine, Requeued: r.Requeued, KeyTails: r.KeyTails}
	} else if present > 0 && foreign == 0 && legacyPassed == 0 {
		notes.UnusableAhead = true
	}
	if files.offset != nil {
		o, err := decodeOffset(files.offset, key)
		switch {
		case err != nil:
			notes.ConsumerOffset, notes.offset = err.Error(), OffsetDamaged
		case o.legacy && n >= 0:
			// An older release levels it with the slots and never ahead of them: with a
			// slot to go by, the unverifiable copy adds nothing but risk.
			notes.offset = OffsetLegacyBeside
		case o.legacy && !id.countsLegacyOffset(o.frontier):
			notes.LegacyUnderIncarnation++
			notes.offset = OffsetLegacyIgnored
		case o.legacy:
			st = State{Found: true, Frontier: o.frontier, Unverified: true}
			notes.offset = OffsetLegacyGivesFrontier
		case id.incarnation == 0 || o.incarnation != id.incarnation:
			notes.ConsumerOffset = "consumer.offset of another incarnation"
			notes.offset = OffsetOtherIncarnation
		case !st.Found || o.frontier > st.Frontier:
			st.Found, st.Frontier = true, o.frontier
			notes.offset = OffsetGivesFrontier
		default:
			notes.offset = OffsetBehind
		}
	}
	st.Ahead, st.KeyTails = tailsAbove(st.Ahead, st.KeyTails, st.Frontier)
	st.Ahead = above(st.Ahead, st.Frontier)
	st.Attempts = unresolved(st.Attempts, st.Frontier, st.Ahead)
	st.Requeued = atOrBelow(st.Requeued, st.Frontier)
	st.Incarnation, st.HostIncarnation = id.incarnation, id.host
	return st, notes, nil
}

// decodedSlot is one consumer.ahead slot as read: its record, why it is not one (nil when it
// is), and its checksum, by which consumer.id names an adopted record.
type decodedSlot struct {
	rec Record
	err error
	crc uint32
}

func (d *decodedSlot) decode(b []byte) {
	d.err = DecodeSlot(b, &d.rec)
	if len(b) == SlotSize {
		d.crc = binary.BigEndian.Uint32(b[offCRC:])
	}
}

// chooseSlot picks the newest valid slot of the partition that counts under id (see
// identity.countsSlot), or -1. It also counts the valid records of another partition or
// incarnation (foreign), and the legacy records it passed over that are newer than the slot
// taken, or with none taken (legacyPassed): before consumer.id said which legacy records
// count, such a record would have been taken, and the partition now delivers again what it
// would have settled. A legacy record older than the slot taken changes nothing and is passed
// over without being counted (the previous anchor of an upgrade, say).
func chooseSlot(slots *[AheadSlots]decodedSlot, key uint32, id identity) (n, foreign, legacyPassed int) {
	n, status := classifySlots(slots, key, id)
	for _, s := range status {
		switch s {
		case SlotForeign, SlotOtherIncarnation:
			foreign++
		case SlotLegacyIgnored:
			legacyPassed++
		}
	}
	return n, foreign, legacyPassed
}

// classifySlots is chooseSlot's decision, slot by slot: the slot taken (or -1), and what each
// slot is to recovery. A slot that holds no valid record is SlotBlank, SlotNewer or
// SlotDamaged by its decode error.
func classifySlots(slots *[AheadSlots]decodedSlot, key uint32, id identity) (n int, status [AheadSlots]SlotStatus) {
	var counts, legacyOnly [AheadSlots]bool
	var recs [AheadSlots]Record
	for i := range slots {
		s := &slots[i]
		switch {
		case errors.Is(s.err, errBlank):
			status[i] = SlotBlank
		case errors.Is(s.err, ErrNewerSlot):
			status[i] = SlotNewer
		case s.err != nil:
			status[i] = SlotDamaged
		case s.rec.Key != key:
			status[i] = SlotForeign
		case id.countsSlot(&s.rec, s.crc):
			status[i], counts[i] = SlotOlder, true // SlotTaken, if newestSlot takes it
		case s.rec.Incarnation == 0:
			status[i], legacyOnly[i] = SlotLegacyPassed, true
		default:
			status[i] = SlotOtherIncarnation
		}
		if s.err == nil {
			recs[i] = s.rec // newestSlot reads the header fields only
		}
	}
	n = newestSlot(counts, &recs)
	if n >= 0 {
		status[n] = SlotTaken
	}
	for i := range slots {
		if !legacyOnly[i] {
			continue
		}
		withIt := counts
		withIt[i] = true
		if newestSlot(withIt, &recs) == i {
			status[i] = SlotLegacyIgnored
		}
	}
	return n, status
}

// unresolved keeps, in place, the attempts of offsets above frontier that are not in ahead
// (both ascending).
func unresolved(as []Attempt, frontier int64, ahead []Run) []Attempt {
	out, i := as[:0], 0
	for _, a := range as {
		if a.Offset <= frontier {
			continue
		}
		for i < len(ahead) && ahead[i].Last < a.Offset {
			i++
		}
		if i < len(ahead) && ahead[i].First <= a.Offset {
			continue // acked ahead
		}
		out = append(out, a)
	}
	return out
}

// tailsAbove is what is left of a slot's acked-ahead runs and key tails under frontier. Every
// tail lies above the slot's own frontier; one at or below frontier (a consumer.offset ahead
// of the slot taken) says that its key's records above frontier in the runs may be parked,
// and which they are cannot be told without their keys: then neither the runs nor the tails
// are kept, and every record above the frontier is delivered again, never skipped.
func tailsAbove(ahead []Run, tails []KeyTail, frontier int64) ([]Run, []KeyTail) {
	if len(tails) > 0 && tails[0].From <= frontier {
		return ahead[:0], tails[:0]
	}
	return ahead, tails
}

// atOrBelow drops the trailing offsets above frontier, in place.
func atOrBelow(offs []int64, frontier int64) []int64 {
	n := len(offs)
	for n > 0 && offs[n-1] > frontier {
		n--
	}
	return offs[:n]
}

// above drops the leading offsets at or below frontier, in place: the runs that end there,
// and the part of a run that straddles it.
func above(ahead []Run, frontier int64) []Run {
	i := 0
	for i < len(ahead) && ahead[i].Last <= frontier {
		i++
	}
	if i < len(ahead) && ahead[i].First <= frontier {
		ahead[i].First = frontier + 1
	}
	if i == 0 {
		return ahead
	}
	n := copy(ahead, ahead[i:])
	return ahead[:n]
}

// Load reads the partition's files by path, the way recovery does (see Recover), for a shard
// being created, a partition being moved, or the token estimate of a partition not loaded
// A missing directory or files mean no state (State.Found false),
// not an error; a read error is an error, so the host retries rather than start the partition
// over. What recovery ignored (a damaged or foreign file, an unusable consumer.ahead) is logged
// as an error and counted (Stats.IgnoredFiles). State.Incarnation is always set: consumer.id's,
// or a fresh one. Load takes no lock of the committer and may run beside a tick. It is
// LoadBound for a host that names no incarnation of the topic.
//
// A host creating a shard from the result passes it through ClampToWatermark, installs
// the shard, and then calls MarkDirty for the partition. What Load read may sit only in the page
// cache (a process crash before its writeout); the tick that follows primes the partition,
// which makes it durable, and writes the shard's state out, so a power loss cannot take back
// what the restart observed even if the partition is never acked again (invariant "monotone across restarts" in docs/protocol.md), and a
// clamped frontier replaces the bad one in both files.
func (c *Committer) Load(topic string, partition int32) (State, error) {
	return c.LoadBound(topic, partition, 0)
}

// LoadBound is Load for a host that knows the incarnation of the topic in its own log, host
// (0: it names none). A state bound to another host incarnation (consumer.id says which) is
// not this life's: an earlier life of the topic restored from a backup, or a recreated
// topic's stale files. It is ignored as a whole, logged and counted as Load's other ignored
// files are, and the partition starts as new under a fresh incarnation, delivering its
// retained records again. An unbound state (written before the binding, or under a host that
// named none) is trusted, as Load trusts it, and bound to host at the partition's next prime:
// the upgrade. State.HostIncarnation is host, or consumer.id's binding when host is 0.
func (c *Committer) LoadBound(topic string, partition int32, host uint64) (State, error) {
	st, notes, err := c.recoverFiles(topic, partition, "load")
	if err != nil {
		return st, err
	}
	if bound := st.HostIncarnation; host != 0 && bound != 0 && bound != host {
		notes.ConsumerID = fmt.Sprintf("bound to host incarnation %016x of the topic, not the host's %016x: an earlier life's state",
			bound, host)
		st = State{Frontier: -1}
	}
	if notes.Any() {
		c.stats.ignoredFiles.Add(1)
		c.log.Error(msgIgnored, "topic", topic, "partition", partition,
			"foreign_slots", notes.ForeignSlots, "damaged_slots", notes.DamagedSlots,
			"legacy_under_incarnation", notes.LegacyUnderIncarnation,
			"unusable_consumer_ahead", notes.UnusableAhead, "consumer_offset", notes.ConsumerOffset,
			"consumer_id", notes.ConsumerID, "frontier_kept", st.Frontier, "found", st.Found)
	}
	if st.Incarnation == 0 {
		st.Incarnation = newIncarnation()
	}
	if host != 0 {
		st.HostIncarnation = host
	}
	return st, nil
}

// Peek reads a partition's persisted state as Load would recover it, for a look only: nothing
// is logged or counted (damaged or foreign files read as Load would ignore them), and no
// incarnation is made for a partition with none. A host's status call uses it on a partition
// it has not loaded, however often it asks.
func (c *Committer) Peek(topic string, partition int32) (State, error) {
	st, _, err := c.recoverFiles(topic, partition, "peek")
	return st, err
}

// recoverFiles reads a partition's state files and recovers its state from them, with what
// recovery noted of them; an error is a PartitionError of op.
func (c *Committer) recoverFiles(topic string, partition int32, op string) (State, recoveryNotes, error) {
	files, err := readStateFiles(c.fs, c.dir(topic, partition))
	if err != nil {
		return State{Frontier: -1}, recoveryNotes{}, &PartitionError{Topic: topic, Partition: partition, Op: op, Err: err}
	}
	st, notes, err := recoverState(PartitionKey(topic, partition), files)
	if err != nil {
		return st, notes, &PartitionError{Topic: topic, Partition: partition, Op: op, Err: err}
	}
	return st, notes, nil
}

// readStateFiles reads consumer.id and consumer.offset (each up to one byte more than it
// should hold, so a longer file shows as such) and consumer.ahead (up to AheadFileSize bytes)
// from dir; a missing directory or file reads as nil.
func readStateFiles(fsys FS, dir string) (stateFiles, error) {
	var files stateFiles
	root, err := fsys.OpenRoot(dir)
	if gone(err) {
		return files, nil
	}
	if err != nil {
		return files, err
	}
	defer root.Close()
	if files.id, err = readPrefix(root, IDFile, MaxIDFileSize+1); err != nil {
		return stateFiles{}, err
	}
	if files.ahead, err = readPrefix(root, AheadFile, AheadFileSize); err != nil {
		return stateFiles{}, err
	}
	if files.offset, err = readPrefix(root, OffsetFile, OffsetFileSize+1); err != nil {
		return stateFiles{}, err
	}
	return files, nil
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

// ClampToWatermark guards against a frontier the log cannot have, at or above hwm (the next
// offset to be written). From a verified file it is a log that lost its tail: the frontier is
// clamped to hwm-1 and offsets at or above hwm are dropped from every set (acked-ahead,
// attempts, quarantine, requeued), and the key tails from there: no such record exists. From
// an unverifiable one (the legacy consumer.offset, State.Unverified) it is damage: the state
// is dropped and the partition starts afresh, keeping its whole retained backlog, since
// redelivering beats skipping. Either way it is logged loudly and counted (Stats.Clamps).
// The host calls it on every load.
func (c *Committer) ClampToWatermark(topic string, partition int32, st State, hwm int64) State {
	if st.Found && st.Unverified && st.Frontier >= hwm {
		c.stats.clamps.Add(1)
		c.log.Error(msgUnverifiedFrontier, "topic", topic, "partition", partition,
			"frontier", st.Frontier, "high_watermark", hwm)
		return State{Frontier: -1, Incarnation: st.Incarnation, HostIncarnation: st.HostIncarnation}
	}
	clamped, d := clampState(st, hwm)
	if clamped.Frontier != st.Frontier || d != (clampDrops{}) {
		c.stats.clamps.Add(1)
		c.log.Error(msgClamped, "topic", topic, "partition", partition, "frontier", st.Frontier,
			"high_watermark", hwm, "clamped_to", clamped.Frontier, "dropped_ahead", d.ahead,
			"dropped_attempts", d.attempts, "dropped_quarantine", d.quarantine,
			"dropped_requeued", d.requeued, "dropped_key_tails", d.tails)
	}
	return clamped
}

// clampDrops counts what clampState dropped from each set.
type clampDrops struct{ ahead, attempts, quarantine, requeued, tails int }

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
	st.Ahead, d.ahead = runsBelow(st.Ahead, hwm)
	st.Quarantine, d.quarantine = below(st.Quarantine, hwm)
	st.Requeued, d.requeued = below(st.Requeued, hwm) // at or below the clamped frontier, then
	// The tails ascend by From, each above the frontier, which only went down.
	k := len(st.KeyTails)
	for k > 0 && st.KeyTails[k-1].From >= hwm {
		k--
	}
	st.KeyTails, d.tails = st.KeyTails[:k], len(st.KeyTails)-k
	n := len(st.Attempts)
	for n > 0 && st.Attempts[n-1].Offset >= hwm {
		n--
	}
	st.Attempts, d.attempts = st.Attempts[:n], len(st.Attempts)-n
	return st, d
}

// runsBelow cuts the offsets at or above hwm off the end of runs and says how many it cut.
// A run that straddles hwm is shortened in a copy, so st's slices are never written.
func runsBelow(runs []Run, hwm int64) ([]Run, int) {
	n := len(runs)
	for n > 0 && runs[n-1].First >= hwm {
		n--
	}
	cut := runsLen(runs[n:])
	kept := runs[:n]
	if n > 0 && runs[n-1].Last >= hwm {
		cut += Run{hwm, runs[n-1].Last}.Len()
		kept = append([]Run(nil), kept...)
		kept[n-1].Last = hwm - 1
	}
	return kept, int(min(cut, math.MaxInt))
}

// below cuts the trailing offsets at or above hwm and says how many it cut.
func below(offs []int64, hwm int64) ([]int64, int) {
	n := len(offs)
	for n > 0 && offs[n-1] >= hwm {
		n--
	}
	return offs[:n], len(offs) - n
}
