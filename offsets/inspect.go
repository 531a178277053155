package offsets

// Inspection is a partition's state files decoded one by one, with what recovery makes of
// each and of them all: for an operator's tool that shows a node's state directory and says
// what a start would recover from it, what it would ignore, and why. It comes from
// recovery's own code (Recover's decoders and its choice of slot), so the two cannot
// disagree. The package doc ("Files") has the layouts and the rules.
type Inspection struct {
	// State is what recovery takes, as ReadDir returns it: Incarnation is 0 when consumer.id
	// holds none to trust (Load then draws a fresh one, and the partition's next prime
	// writes it into a new consumer.id).
	State State
	// Err is recovery's refusal, nil when it takes State: a record from a newer release
	// (matching ErrNewerSlot), which Load answers too, so the host does not start the
	// partition from these files. No slot is then SlotTaken.
	Err error
	// Ignored is what recovery ignored, as Load logs it and counts it in Stats.IgnoredFiles.
	Ignored Ignored
	ID      IDInspection
	Ahead   AheadInspection
	Offset  OffsetInspection
}

// Ignored is what recovery ignored in a partition's files: what it would have settled is
// delivered again. Load logs it as one error line, each field under the name given, and
// counts it in Stats.IgnoredFiles.
type Ignored struct {
	// ForeignSlots counts valid records of another partition or incarnation (foreign_slots).
	ForeignSlots int
	// DamagedSlots counts slots neither blank nor valid: torn, bit-flipped, truncated or
	// malformed (damaged_slots).
	DamagedSlots int
	// LegacyUnderIncarnation counts legacy records (of a release before consumer.id) that
	// consumer.id's incarnation did not adopt and that would have been taken before
	// consumer.id said which count (legacy_under_incarnation).
	LegacyUnderIncarnation int
	// UnusableAhead is set when consumer.ahead holds more than blank slots and no slot of it
	// counts, none being another partition's, another incarnation's or a legacy record: the
	// file is damaged as a whole (short, torn, every slot bad) (unusable_consumer_ahead).
	UnusableAhead bool
	// ConsumerOffset says why consumer.offset was ignored, "" when it was not
	// (consumer_offset).
	ConsumerOffset string
	// ConsumerID says why consumer.id was ignored, "" when it was not (consumer_id).
	ConsumerID string
}

// Any reports whether recovery ignored anything.
func (ig Ignored) Any() bool {
	return ig.ForeignSlots > 0 || ig.DamagedSlots > 0 || ig.LegacyUnderIncarnation > 0 ||
		ig.UnusableAhead || ig.ConsumerOffset != "" || ig.ConsumerID != ""
}

// FileRead is how a state file was read.
type FileRead struct {
	// Present is false when the file does not exist.
	Present bool
	// Size is how many bytes were read: the whole file, or as far as recovery reads (one
	// byte past the largest valid size of consumer.id and consumer.offset, AheadFileSize of
	// consumer.ahead), so a longer file shows as such.
	Size int
}

// IDInspection is consumer.id as read.
type IDInspection struct {
	FileRead
	// Err says why the file names no incarnation recovery trusts (it matches
	// ErrDamagedStateFile); nil when it does, or when it is missing.
	Err error
	// Incarnation is the incarnation it names, when Err is nil and the file is present.
	Incarnation uint64
	// Adopted is set for the 44-byte form: the incarnation began by adopting the legacy
	// records of a release before consumer.id, which gave AdoptedFrontier; when AdoptedSlot
	// is set, among them the consumer.ahead record of sequence number AdoptedSeq and checksum
	// AdoptedChecksum (see SlotInspection.Checksum).
	Adopted         bool
	AdoptedFrontier int64
	AdoptedSlot     bool
	AdoptedSeq      uint64
	AdoptedChecksum uint32
	// HostIncarnation is the host's incarnation of the topic the state is bound to (the
	// 32- and 52-byte forms), 0 when unbound. Inspect knows no host to compare it with.
	HostIncarnation uint64
}

// AheadInspection is consumer.ahead as read: its slots (an older release's file ends before
// the third, SlotMissing).
type AheadInspection struct {
	FileRead
	Slots [AheadSlots]SlotInspection
}

// SlotInspection is one slot of consumer.ahead as read.
type SlotInspection struct {
	// Status is what the slot is to recovery.
	Status SlotStatus
	// Err is why the slot holds no valid record (matching ErrCorruptSlot, or a *VersionError
	// for a newer release's record); nil when it holds one, or is missing.
	Err error
	// Record is the slot's record, when Err is nil and the slot is not missing.
	Record Record
	// Checksum is the slot's last four bytes, by which an adopted consumer.id names it; 0
	// for a slot the file does not hold whole.
	Checksum uint32
}

// SlotStatus is what a slot of consumer.ahead is to recovery.
type SlotStatus uint8

// The statuses of a slot. Only SlotDamaged, SlotForeign, SlotOtherIncarnation and
// SlotLegacyIgnored are counted in Ignored; a missing, blank or passed slot is no damage.
const (
	SlotMissing          SlotStatus = iota // the file ends before the slot
	SlotBlank                              // all zeros: a prime's extension before its first window
	SlotDamaged                            // torn, bit-flipped, truncated or malformed (Err says which)
	SlotNewer                              // a record of a newer release: recovery refuses the partition
	SlotTaken                              // the record recovery takes every set from
	SlotOlder                              // a record that counts, older than the one taken
	SlotForeign                            // a valid record of another partition
	SlotOtherIncarnation                   // names another incarnation than consumer.id, or there is no valid consumer.id
	SlotLegacyIgnored                      // a legacy record consumer.id did not adopt, which would have been taken without it
	SlotLegacyPassed                       // a legacy record consumer.id did not adopt, older than the one taken: no loss
)

var slotStatusNames = [...]string{
	SlotMissing:          "missing",
	SlotBlank:            "blank",
	SlotDamaged:          "damaged",
	SlotNewer:            "newer release",
	SlotTaken:            "taken",
	SlotOlder:            "older",
	SlotForeign:          "another partition",
	SlotOtherIncarnation: "another incarnation",
	SlotLegacyIgnored:    "legacy, not adopted",
	SlotLegacyPassed:     "legacy, passed over",
}

func (s SlotStatus) String() string {
	if int(s) < len(slotStatusNames) {
		return slotStatusNames[s]
	}
	return "unknown"
}

// OffsetInspection is consumer.offset as read.
type OffsetInspection struct {
	FileRead
	// Err says why the file does not decode for the partition (it matches
	// ErrDamagedStateFile); nil when it does, or when it is missing.
	Err error
	// Legacy is set for the 8-byte form of releases before consumer.id: no checksum, no
	// identity.
	Legacy bool
	// Frontier and Incarnation are what it holds, when Err is nil (Incarnation 0 in the
	// legacy form).
	Frontier    int64
	Incarnation uint64
	// Use is what recovery made of it.
	Use OffsetUse
}

// OffsetUse is what recovery makes of consumer.offset.
type OffsetUse uint8

// The uses of consumer.offset. OffsetDamaged, OffsetOtherIncarnation and
// OffsetLegacyIgnored are counted in Ignored.
const (
	OffsetMissing             OffsetUse = iota // no file (or recovery refused the partition first)
	OffsetDamaged                              // it does not decode for the partition (Err)
	OffsetOtherIncarnation                     // names another incarnation than consumer.id, or there is no valid consumer.id
	OffsetGivesFrontier                        // it gives the recovered frontier: ahead of the slot taken, or no slot taken
	OffsetBehind                               // it counts, at or behind the slot's frontier
	OffsetLegacyBeside                         // the legacy form beside a slot that counts: it adds nothing
	OffsetLegacyIgnored                        // the legacy form, not adopted by consumer.id's incarnation
	OffsetLegacyGivesFrontier                  // the legacy form gives the frontier, unverified (State.Unverified)
)

var offsetUseNames = [...]string{
	OffsetMissing:             "missing",
	OffsetDamaged:             "damaged",
	OffsetOtherIncarnation:    "another incarnation",
	OffsetGivesFrontier:       "gives the frontier",
	OffsetBehind:              "behind the slot",
	OffsetLegacyBeside:        "legacy, beside a slot",
	OffsetLegacyIgnored:       "legacy, not adopted",
	OffsetLegacyGivesFrontier: "legacy, gives the frontier",
}

func (u OffsetUse) String() string {
	if int(u) < len(offsetUseNames) {
		return offsetUseNames[u]
	}
	return "unknown"
}

// Inspect reads the state files of a partition from its directory dir through fsys (nil:
// the real file system), as ReadDir does, and decodes each of them. It never writes, and it
// may run beside a node: what it reads is then as of the node's last window write. A
// missing directory or files are no error (nothing is Present); a read error is, wrapped in
// a *PartitionError (Op "inspect").
func Inspect(fsys FS, dir, topic string, partition int32) (Inspection, error) {
	if fsys == nil {
		fsys = OS()
	}
	files, err := readStateFiles(fsys, dir)
	if err != nil {
		return Inspection{State: State{Frontier: -1}},
			&PartitionError{Topic: topic, Partition: partition, Op: "inspect", Err: err}
	}
	return inspect(PartitionKey(topic, partition), files), nil
}

// InspectFiles is Inspect over the raw bytes of consumer.id, consumer.ahead and
// consumer.offset, each nil when missing (as Recover takes them). It never panics.
func InspectFiles(topic string, partition int32, idFile, aheadFile, offsetFile []byte) Inspection {
	return inspect(PartitionKey(topic, partition), stateFiles{idFile, aheadFile, offsetFile})
}

func inspect(key uint32, files stateFiles) Inspection {
	st, notes, err := recoverState(key, files)
	in := Inspection{State: st, Err: err, Ignored: notes.Ignored}

	var id identity
	in.ID.FileRead = FileRead{Present: files.id != nil, Size: len(files.id)}
	if files.id != nil {
		id, in.ID.Err = decodeID(files.id, key)
		in.ID.Incarnation, in.ID.HostIncarnation = id.incarnation, id.host
		if a := id.adopted; a.legacy {
			in.ID.Adopted, in.ID.AdoptedFrontier = true, a.frontier
			in.ID.AdoptedSlot, in.ID.AdoptedSeq, in.ID.AdoptedChecksum = a.slot, a.seq, a.slotCRC
		}
	}

	in.Ahead.FileRead = FileRead{Present: files.ahead != nil, Size: len(files.ahead)}
	var slots [AheadSlots]decodedSlot
	for i := range slots {
		lo, hi := i*SlotSize, (i+1)*SlotSize
		switch {
		case len(files.ahead) <= lo:
			slots[i].err = errShort // missing; told apart below
		case len(files.ahead) < hi:
			slots[i].err = errShort // a partial slot
		default:
			slots[i].decode(files.ahead[lo:hi])
		}
	}
	_, status := classifySlots(&slots, key, id)
	for i := range slots {
		s := &in.Ahead.Slots[i]
		s.Status, s.Err, s.Checksum = status[i], slots[i].err, slots[i].crc
		if slots[i].err == nil {
			s.Record = slots[i].rec
		}
		switch {
		case len(files.ahead) <= i*SlotSize:
			s.Status, s.Err = SlotMissing, nil
		case err != nil && s.Status == SlotTaken:
			s.Status = SlotOlder // recovery refused the partition: it takes nothing
		}
	}

	in.Offset.FileRead = FileRead{Present: files.offset != nil, Size: len(files.offset)}
	in.Offset.Use = notes.offset
	if files.offset != nil {
		o, oerr := decodeOffset(files.offset, key)
		in.Offset.Err = oerr
		if oerr == nil {
			in.Offset.Legacy, in.Offset.Frontier, in.Offset.Incarnation = o.legacy, o.frontier, o.incarnation
		}
	}
	return in
}
