package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"narad.dev/consume/offsets"
	"narad.dev/consume/router"
)

// The verdicts on a partition. Those of badVerdicts make verify exit with status 1.
const (
	verdictOK           = "ok"            // recovery takes the files as they are (or there are none)
	verdictIgnored      = "ignored"       // recovery ignores a damaged or foreign file or slot
	verdictDamaged      = "damaged"       // consumer.ahead has a size no node writes, which recovery does not see
	verdictRefused      = "refused"       // recovery refuses the files: a newer release's record
	verdictUnreadable   = "unreadable"    // the state cannot be read: the node sets the partition aside
	verdictMoved        = "moved"         // handed off from this node: it does not load the partition
	verdictShadowed     = "shadowed"      // a legacy directory beside the current one: never read
	verdictUnknownTopic = "unknown-topic" // the topic directory's name gives no topic
)

var badVerdicts = []string{verdictIgnored, verdictDamaged, verdictRefused, verdictUnreadable, verdictShadowed, verdictUnknownTopic}

// readNote is said of every read-only command: they take no lock.
const readNote = "read without the node's lock: a node running on this directory writes each partition's window " +
	"every tick (100 ms), so what is shown may be a moment old"

// report is what list, show and verify print.
type report struct {
	Dir        string            `json:"dir"`
	Note       string            `json:"note"`
	Partitions []partitionReport `json:"partitions"`
	Other      []otherEntry      `json:"other,omitempty"`
}

// partitionReport is one partition: where it is, what recovery makes of it, and, for show,
// every file decoded.
type partitionReport struct {
	Topic          string      `json:"topic"`
	TopicKnown     bool        `json:"topic_known"`
	TopicDir       string      `json:"topic_dir"`
	Partition      int32       `json:"partition"`
	Dir            string      `json:"dir"`
	LegacyTopicDir bool        `json:"legacy_topic_dir,omitempty"`
	Verdict        string      `json:"verdict"`
	Files          []fileEntry `json:"files"`
	OtherEntries   []string    `json:"other_entries,omitempty"`
	Error          string      `json:"error,omitempty"`
	Recovery       *recovery   `json:"recovery,omitempty"`
	Ignored        []finding   `json:"ignored,omitempty"`
	Damaged        []finding   `json:"damaged,omitempty"`
	Passed         []finding   `json:"passed_over,omitempty"`
	NextStart      string      `json:"next_start"`
	Decoded        *decoded    `json:"decoded,omitempty"`
}

// fileEntry is a state file present in the partition's directory.
type fileEntry struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
	Kind string `json:"kind"` // file, directory, symlink, other
}

// recovery is what a start would recover: offsets.Inspection.State, and why.
type recovery struct {
	Found           bool       `json:"found"`
	Frontier        int64      `json:"frontier"`
	Unverified      bool       `json:"unverified,omitempty"`
	Incarnation     string     `json:"incarnation,omitempty"` // "" when a node would draw a fresh one
	AckedAhead      []run      `json:"acked_ahead"`
	AckedAheadCount int        `json:"acked_ahead_count"`
	KeyTails        []keyTail  `json:"key_tails,omitempty"` // the records of AckedAhead that are parked, not settled
	Attempts        []attempts `json:"attempts"`
	Quarantine      []run      `json:"quarantine"`
	QuarantineCount int        `json:"quarantine_count"`
	Requeued        []run      `json:"requeued"`
	Refused         string     `json:"refused,omitempty"`
	Why             []string   `json:"why"`
}

// finding is a file or slot recovery ignores or passes over, and why.
type finding struct {
	File   string `json:"file"`
	Reason string `json:"reason"`
}

// run is a maximal run of consecutive offsets, both ends included.
type run [2]int64

// keyTail is one key's parked records on an ordered topic (offsets.KeyTail): every record of
// the key at or above From that the acked-ahead runs hold is not settled, and is delivered
// again. Key is the key's 64-bit identity, in hex.
type keyTail struct {
	Key  string `json:"key"`
	From int64  `json:"from"`
}

type attempts struct {
	Offset int64  `json:"offset"`
	Count  uint32 `json:"count"`
}

// decoded is every state file decoded (show).
type decoded struct {
	ID     idView     `json:"consumer_id"`
	Ahead  aheadView  `json:"consumer_ahead"`
	Offset offsetView `json:"consumer_offset"`
}

type idView struct {
	Present         bool   `json:"present"`
	Read            int    `json:"bytes_read"`
	Valid           bool   `json:"valid"`
	Error           string `json:"error,omitempty"`
	Incarnation     string `json:"incarnation,omitempty"`
	Adopted         bool   `json:"adopted_legacy,omitempty"`
	AdoptedFrontier *int64 `json:"adopted_frontier,omitempty"`
	AdoptedSeq      *int64 `json:"adopted_seq,omitempty"`
	AdoptedChecksum string `json:"adopted_checksum,omitempty"`
	// HostIncarnation is the host's incarnation of the topic the state is bound to (as the
	// node digests it), "" when unbound.
	HostIncarnation string `json:"host_incarnation,omitempty"`
}

type aheadView struct {
	Present bool       `json:"present"`
	Read    int        `json:"bytes_read"`
	Slots   []slotView `json:"slots"`
}

type slotView struct {
	Slot            int        `json:"slot"`
	Status          string     `json:"status"`
	Error           string     `json:"error,omitempty"`
	Seq             uint64     `json:"seq,omitempty"`
	Frontier        *int64     `json:"frontier,omitempty"`
	Key             string     `json:"key,omitempty"`
	KeyOK           bool       `json:"key_ok,omitempty"`
	Incarnation     string     `json:"incarnation,omitempty"` // "" in a legacy record
	AckedAhead      []run      `json:"acked_ahead,omitempty"`
	AckedAheadCount int        `json:"acked_ahead_count,omitempty"`
	KeyTails        []keyTail  `json:"key_tails,omitempty"` // in a version 2 record only
	Attempts        []attempts `json:"attempts,omitempty"`
	Quarantine      []run      `json:"quarantine,omitempty"`
	Requeued        []run      `json:"requeued,omitempty"`
	Dropped         uint32     `json:"dropped,omitempty"`
	Checksum        string     `json:"checksum,omitempty"`
}

type offsetView struct {
	Present     bool   `json:"present"`
	Read        int    `json:"bytes_read"`
	Valid       bool   `json:"valid"`
	Error       string `json:"error,omitempty"`
	Legacy      bool   `json:"legacy,omitempty"`
	Frontier    *int64 `json:"frontier,omitempty"`
	Incarnation string `json:"incarnation,omitempty"`
	Use         string `json:"use"`
}

// agree is the word for one subject, or for n of them.
func agree(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

func hex64(v uint64) string { return fmt.Sprintf("%016x", v) }
func hex32(v uint32) string { return fmt.Sprintf("%08x", v) }

// runsOf groups ascending offsets into maximal runs.
func runsOf(offs []int64) []run {
	runs := []run{}
	for _, o := range offs {
		if n := len(runs); n > 0 && o > runs[n-1][1] && o-1 == runs[n-1][1] {
			runs[n-1][1] = o
			continue
		}
		runs = append(runs, run{o, o})
	}
	return runs
}

// aheadRuns is an acked-ahead set, kept as runs, as the tool prints runs.
func aheadRuns(rs []offsets.Run) []run {
	runs := make([]run, len(rs))
	for i, r := range rs {
		runs[i] = run{r.First, r.Last}
	}
	return runs
}

// aheadCount is how many offsets an acked-ahead set holds.
func aheadCount(rs []offsets.Run) int64 {
	var n int64
	for _, r := range rs {
		n += r.Len()
	}
	return n
}

// keyTailsOf is a state's or record's key tails as the tool prints them; nil when none.
func keyTailsOf(ks []offsets.KeyTail) []keyTail {
	if len(ks) == 0 {
		return nil
	}
	out := make([]keyTail, len(ks))
	for i, k := range ks {
		out[i] = keyTail{hex64(k.Key), k.From}
	}
	return out
}

func attemptsOf(as []offsets.Attempt) []attempts {
	out := make([]attempts, len(as))
	for i, a := range as {
		out[i] = attempts{a.Offset, a.Count}
	}
	return out
}

// reason is an error's text without the sentinel's words the decoders put first.
func reason(err error) string {
	s := err.Error()
	for _, sentinel := range []error{offsets.ErrDamagedStateFile, offsets.ErrCorruptSlot} {
		if errors.Is(err, sentinel) {
			s = strings.TrimPrefix(s, sentinel.Error()+": ")
		}
	}
	return s
}

// inspectPartition reads one partition's directory and says what recovery makes of it. It
// never writes; a file it cannot read is a verdict, not a failure.
func inspectPartition(ref partitionRef) partitionReport {
	r := partitionReport{Topic: ref.topic, TopicKnown: ref.topicKnown, TopicDir: ref.topicDir,
		Partition: ref.partition, Dir: ref.path, LegacyTopicDir: ref.legacyName, Files: []fileEntry{}}
	fi, err := os.Stat(ref.path)
	switch {
	case err != nil:
		r.Verdict, r.Error = verdictUnreadable, err.Error()
		r.NextStart = "the node cannot load the partition's state: it sets the partition aside and retries with backoff"
		return r
	case !fi.IsDir():
		r.Verdict, r.Error = verdictUnreadable, "a file where the partition's directory should be"
		r.NextStart = "the node cannot create the partition's directory: it sets the partition aside and retries with backoff; remove the file, or reset the partition"
		return r
	}
	moved := false
	for _, name := range stateFileNames {
		fi, err := os.Lstat(filepath.Join(ref.path, name))
		if err != nil {
			continue
		}
		kind := "other"
		switch m := fi.Mode(); {
		case m.IsRegular():
			kind = "file"
		case m.IsDir():
			kind = "directory"
		case m&fs.ModeSymlink != 0:
			kind = "symlink"
		}
		r.Files = append(r.Files, fileEntry{name, fi.Size(), kind})
		moved = moved || name == router.MovedFile
	}
	if entries, err := os.ReadDir(ref.path); err == nil {
		for _, e := range entries {
			if !slices.Contains(stateFileNames, e.Name()) {
				r.OtherEntries = append(r.OtherEntries, e.Name())
			}
		}
	}
	if !ref.topicKnown {
		r.Verdict = verdictUnknownTopic
		r.NextStart = "the topic directory's name gives no topic (a long topic's name is a hash of it): " +
			"name the topic, as in consumestate verify DIR TOPIC, to read the partition's state"
		return r
	}
	in, err := offsets.Inspect(nil, ref.path, ref.topic, ref.partition)
	if err != nil {
		r.Verdict, r.Error = verdictUnreadable, err.Error()
		r.NextStart = "the node cannot load the partition's state either: it sets the partition aside " +
			"(router.Node.Health) and retries with backoff; repair the directory, or reset the partition"
		return r
	}
	aheadSize := int64(-1)
	if fi, err := os.Stat(filepath.Join(ref.path, offsets.AheadFile)); err == nil {
		aheadSize = fi.Size()
	}
	describe(&r, &in, ref, moved, aheadSize)
	return r
}

// aheadDamage says what is wrong with consumer.ahead's size, "" when nothing is. Recovery
// reads the file as far as its three slots go and takes a slot the file ends before for one an
// older release never wrote: it does not see a file that was emptied, cut at a slot's bound or
// grown. A node writes consumer.ahead whole (offsets.AheadFileSize), or, a release before
// the third slot, two slots; it is empty only while a partition's first prime is under way,
// before it extends the file, and so before any consumer.offset. size is the file's (-1 when
// it is missing).
func aheadDamage(size int64, offsetPresent bool) string {
	const whole, older = offsets.AheadFileSize, 2 * offsets.SlotSize
	switch {
	case size < 0 || size == whole || size == older || (size == 0 && !offsetPresent):
		return ""
	case size == 0:
		return fmt.Sprintf("damaged: emptied (0 bytes) beside %s: a node extends it to %d bytes at the partition's first prime, "+
			"before it ever writes %s, so what its slots held (acked-ahead offsets, attempts, quarantine) is lost",
			offsets.OffsetFile, whole, offsets.OffsetFile)
	case size > whole:
		return fmt.Sprintf("damaged: %d bytes, longer than a node writes (%d: %d slots of %d bytes): something else wrote to it, "+
			"and recovery reads only its first %d bytes", size, whole, offsets.AheadSlots, offsets.SlotSize, whole)
	}
	return fmt.Sprintf("damaged: %d bytes, cut short: a node writes %d (%d slots of %d bytes), a release before the third slot %d; "+
		"what its missing bytes held is lost", size, whole, offsets.AheadSlots, offsets.SlotSize, older)
}

// describe fills r with what recovery makes of the partition's files, in: the decoded files,
// what it takes and why, what it ignores, the damage it does not see (aheadSize is
// consumer.ahead's size, -1 when it is missing), the verdict and the next start. It reads
// nothing.
func describe(r *partitionReport, in *offsets.Inspection, ref partitionRef, moved bool, aheadSize int64) {
	key := offsets.PartitionKey(ref.topic, ref.partition)
	r.Decoded = decode(in, key)
	r.Recovery = recoveryOf(in)
	r.Ignored, r.Passed = findings(in, key)
	if d := aheadDamage(aheadSize, in.Offset.Present); d != "" {
		r.Damaged = []finding{{offsets.AheadFile, d}}
	}
	switch {
	case ref.shadowed:
		r.Verdict = verdictShadowed
		r.NextStart = fmt.Sprintf("never read: the node reads the topic's directory of this release's name, %s, instead; "+
			"remove this one once nothing in it is needed", router.TopicDir(ref.topic))
	case moved:
		r.Verdict = verdictMoved
		r.NextStart = "handed off from this node (consumer.moved): the node does not load the partition and router.ReadState " +
			"refuses it, since its state lives on at the next owner; an Adopt or DropPartition of it on this node removes the mark"
	case in.Err != nil:
		r.Verdict = verdictRefused
		r.NextStart = "the node refuses to load the partition (a record of a newer release, which it neither misreads nor " +
			"overwrites): it sets the partition aside and retries with backoff. Run the release that wrote it, or reset the partition"
	case in.Ignored.Any():
		r.Verdict = verdictIgnored
		r.NextStart = "what the ignored files would have settled is delivered again (the node logs \"consumer offsets: ignoring " +
			"damaged or foreign persisted state\" and counts it in narad_consume_committer_ignored_files_total); " + nextStart(in, ref)
	case len(r.Damaged) > 0:
		r.Verdict = verdictDamaged
		r.NextStart = "what the damaged file held is delivered again, and the node neither logs nor counts it (recovery reads " +
			"the file as it is); " + nextStart(in, ref)
	default:
		r.Verdict = verdictOK
		r.NextStart = nextStart(in, ref)
	}
}

// nextStart says what the partition's next load does with what recovery takes.
func nextStart(in *offsets.Inspection, ref partitionRef) string {
	var b strings.Builder
	if ref.legacyName {
		fmt.Fprintf(&b, "the node first renames the topic's directory to %s; ", router.TopicDir(ref.topic))
	}
	st := &in.State
	if !st.Found {
		b.WriteString("no trusted frontier: the partition starts at the log's oldest retained offset, every retained record delivered")
	} else {
		fmt.Fprintf(&b, "the partition resumes after frontier %d", st.Frontier)
		if n := aheadCount(st.Ahead); n > 0 {
			fmt.Fprintf(&b, ", skipping the %s acked ahead", plural(n, "offset"))
			if k := len(st.KeyTails); k > 0 {
				fmt.Fprintf(&b, ", but for those of %s from %s key %s on (an ordered topic's records parked "+
					"behind a blocked key: not settled, delivered again)", plural(int64(k), "key"), agree(k, "its", "their"),
					agree(k, "tail", "tails"))
			}
		}
		if n := len(st.Quarantine); n > 0 {
			fmt.Fprintf(&b, "; %s stay%s set aside in quarantine", plural(int64(n), "offset"), agree(n, "s", ""))
		}
		if n := len(st.Requeued); n > 0 {
			fmt.Fprintf(&b, "; %s requeued %s delivered again", plural(int64(n), "offset"), agree(n, "is", "are"))
		}
		if n := len(st.Attempts); n > 0 {
			fmt.Fprintf(&b, "; %s keep%s %s delivery attempts", plural(int64(n), "offset"), agree(n, "s", ""),
				agree(n, "its", "their"))
		}
		if st.Unverified {
			b.WriteString("; the frontier is unverified (a legacy consumer.offset): at or past the log's high watermark the node takes it " +
				"for damage and starts at the oldest retained offset instead")
		} else {
			b.WriteString("; a frontier at or past the log's high watermark is clamped below it")
		}
	}
	switch {
	case st.Incarnation != 0:
		fmt.Fprintf(&b, "; incarnation %s goes on", hex64(st.Incarnation))
	case in.ID.Present:
		b.WriteString("; consumer.id is ignored, so the node draws a fresh incarnation and rewrites consumer.id")
	default:
		b.WriteString("; the node draws a fresh incarnation and writes consumer.id")
	}
	return b.String()
}

// recoveryOf is what recovery takes, and why.
func recoveryOf(in *offsets.Inspection) *recovery {
	st := &in.State
	rec := &recovery{Found: st.Found, Frontier: st.Frontier, Unverified: st.Unverified,
		AckedAhead: aheadRuns(st.Ahead), AckedAheadCount: int(aheadCount(st.Ahead)), KeyTails: keyTailsOf(st.KeyTails),
		Attempts:   attemptsOf(st.Attempts),
		Quarantine: runsOf(st.Quarantine), QuarantineCount: len(st.Quarantine), Requeued: runsOf(st.Requeued),
		Why: []string{}}
	if st.Incarnation != 0 {
		rec.Incarnation = hex64(st.Incarnation)
	}
	if in.Err != nil {
		rec.Refused = reason(in.Err)
		for i, s := range in.Ahead.Slots {
			if s.Status == offsets.SlotNewer {
				rec.Why = append(rec.Why, fmt.Sprintf("slot %d holds a checksummed record of a newer release: %s", i, reason(s.Err)))
			}
		}
		return rec
	}
	taken := -1
	for i, s := range in.Ahead.Slots {
		if s.Status == offsets.SlotTaken {
			taken = i
		}
	}
	if taken >= 0 {
		s := &in.Ahead.Slots[taken]
		var why string
		switch {
		case s.Record.Incarnation != 0:
			why = "its checksum holds, it is this partition's, and it names consumer.id's incarnation"
		case in.ID.Incarnation == 0:
			why = "a legacy record (of a release before consumer.id), counted since there is no valid consumer.id to go by"
		default:
			why = "the legacy record consumer.id's incarnation adopted at its upgrade (by sequence number and checksum)"
		}
		rec.Why = append(rec.Why, fmt.Sprintf("slot %d (seq %d, frontier %d) is the newest record that counts: %s",
			taken, s.Record.Seq, s.Record.Frontier, why))
		for i := range in.Ahead.Slots {
			if other := &in.Ahead.Slots[i]; other.Status == offsets.SlotOlder {
				rec.Why = append(rec.Why, fmt.Sprintf("slot %d (seq %d, frontier %d) counts too, but is older", i, other.Record.Seq, other.Record.Frontier))
			}
		}
	}
	o := &in.Offset
	switch o.Use {
	case offsets.OffsetGivesFrontier:
		if taken >= 0 {
			rec.Why = append(rec.Why, fmt.Sprintf("consumer.offset's frontier %d is ahead of the slot's, and the larger is taken", o.Frontier))
		} else {
			rec.Why = append(rec.Why, fmt.Sprintf("no slot counts: consumer.offset gives frontier %d", o.Frontier))
		}
	case offsets.OffsetBehind:
		rec.Why = append(rec.Why, fmt.Sprintf("consumer.offset counts, at frontier %d: not ahead of the slot's", o.Frontier))
	case offsets.OffsetLegacyGivesFrontier:
		rec.Why = append(rec.Why, fmt.Sprintf("no slot counts: the legacy consumer.offset (8 bytes, no checksum) gives frontier %d, unverified", o.Frontier))
	}
	if !st.Found {
		rec.Why = append(rec.Why, "no file holds a frontier recovery trusts")
	}
	rec.Why = append(rec.Why, incarnationWhy(in))
	return rec
}

func incarnationWhy(in *offsets.Inspection) string {
	switch {
	case in.State.Incarnation != 0:
		return fmt.Sprintf("the incarnation, %s, is consumer.id's", hex64(in.State.Incarnation))
	case in.ID.Present:
		return "consumer.id is ignored: no incarnation to trust, so records naming one do not count"
	default:
		return "no consumer.id: no incarnation to trust, so records naming one do not count"
	}
}

// findings lists what recovery ignores (what it would have settled is delivered again), and
// what it passes over at no loss.
func findings(in *offsets.Inspection, key uint32) (ignored, passed []finding) {
	idSays := func() string {
		if in.ID.Incarnation != 0 {
			return "consumer.id names " + hex64(in.ID.Incarnation)
		}
		return "there is no valid consumer.id to trust it"
	}
	if in.ID.Err != nil {
		ignored = append(ignored, finding{offsets.IDFile, reason(in.ID.Err)})
	}
	for i, s := range in.Ahead.Slots {
		name := fmt.Sprintf("%s slot %d", offsets.AheadFile, i)
		r := &s.Record
		switch s.Status {
		case offsets.SlotDamaged:
			ignored = append(ignored, finding{name, "damaged: " + reason(s.Err)})
		case offsets.SlotForeign:
			ignored = append(ignored, finding{name, fmt.Sprintf("a record of another partition (key %s; this partition's is %s)",
				hex32(r.Key), hex32(key))})
		case offsets.SlotOtherIncarnation:
			ignored = append(ignored, finding{name, fmt.Sprintf("names incarnation %s, and %s", hex64(r.Incarnation), idSays())})
		case offsets.SlotLegacyIgnored:
			ignored = append(ignored, finding{name, fmt.Sprintf("a legacy record (seq %d, frontier %d, no incarnation) that consumer.id's "+
				"incarnation did not adopt: a release before consumer.id would have taken it", r.Seq, r.Frontier)})
		case offsets.SlotLegacyPassed:
			passed = append(passed, finding{name, fmt.Sprintf("a legacy record (seq %d) consumer.id's incarnation did not adopt, "+
				"older than the slot taken: no loss", r.Seq)})
		}
	}
	if in.Ignored.UnusableAhead {
		ignored = append(ignored, finding{offsets.AheadFile, "no slot of it is usable"})
	}
	o := &in.Offset
	switch o.Use {
	case offsets.OffsetDamaged:
		ignored = append(ignored, finding{offsets.OffsetFile, reason(o.Err)})
	case offsets.OffsetOtherIncarnation:
		ignored = append(ignored, finding{offsets.OffsetFile, fmt.Sprintf("names incarnation %s, and %s", hex64(o.Incarnation), idSays())})
	case offsets.OffsetLegacyIgnored:
		why := "consumer.id's incarnation adopted no legacy state"
		if in.ID.Adopted {
			why = fmt.Sprintf("it is past the frontier consumer.id's incarnation adopted (%d)", in.ID.AdoptedFrontier)
		}
		ignored = append(ignored, finding{offsets.OffsetFile, fmt.Sprintf("the legacy form (frontier %d), not counted: %s", o.Frontier, why)})
	case offsets.OffsetLegacyBeside:
		passed = append(passed, finding{offsets.OffsetFile, fmt.Sprintf("the legacy form (frontier %d) beside a slot that counts: "+
			"an older release never levelled it ahead of the slots, so it adds nothing", o.Frontier)})
	}
	if in.Ignored.Any() && len(ignored) == 0 {
		ignored = append(ignored, finding{"state files", fmt.Sprintf("%+v", in.Ignored)}) // recovery's own words, should the above miss a case
	}
	return ignored, passed
}

// decode is every file as read (show).
func decode(in *offsets.Inspection, key uint32) *decoded {
	d := &decoded{}
	id := &in.ID
	d.ID = idView{Present: id.Present, Read: id.Size, Valid: id.Present && id.Err == nil}
	if id.Err != nil {
		d.ID.Error = reason(id.Err)
	}
	if d.ID.Valid {
		d.ID.Incarnation = hex64(id.Incarnation)
		if id.HostIncarnation != 0 {
			d.ID.HostIncarnation = hex64(id.HostIncarnation)
		}
		if id.Adopted {
			d.ID.Adopted, d.ID.AdoptedFrontier = true, &id.AdoptedFrontier
			if id.AdoptedSlot {
				seq := int64(id.AdoptedSeq)
				d.ID.AdoptedSeq, d.ID.AdoptedChecksum = &seq, hex32(id.AdoptedChecksum)
			}
		}
	}
	d.Ahead = aheadView{Present: in.Ahead.Present, Read: in.Ahead.Size, Slots: []slotView{}}
	for i := range in.Ahead.Slots {
		s := &in.Ahead.Slots[i]
		v := slotView{Slot: i, Status: s.Status.String()}
		if s.Err != nil && s.Status != offsets.SlotBlank {
			v.Error = reason(s.Err)
		}
		if s.Err == nil && s.Status != offsets.SlotMissing {
			r := &s.Record
			v.Seq, v.Frontier, v.Key, v.KeyOK = r.Seq, &r.Frontier, hex32(r.Key), r.Key == key
			if r.Incarnation != 0 {
				v.Incarnation = hex64(r.Incarnation)
			}
			v.AckedAhead, v.AckedAheadCount = aheadRuns(r.Ahead), int(aheadCount(r.Ahead))
			v.KeyTails = keyTailsOf(r.KeyTails)
			v.Attempts, v.Quarantine, v.Requeued = attemptsOf(r.Attempts), runsOf(r.Quarantine), runsOf(r.Requeued)
			v.Dropped = r.Dropped
		}
		if s.Checksum != 0 {
			v.Checksum = hex32(s.Checksum)
		}
		d.Ahead.Slots = append(d.Ahead.Slots, v)
	}
	o := &in.Offset
	d.Offset = offsetView{Present: o.Present, Read: o.Size, Valid: o.Present && o.Err == nil, Use: o.Use.String()}
	if o.Err != nil {
		d.Offset.Error = reason(o.Err)
	}
	if d.Offset.Valid {
		d.Offset.Legacy, d.Offset.Frontier = o.Legacy, &o.Frontier
		if o.Incarnation != 0 {
			d.Offset.Incarnation = hex64(o.Incarnation)
		}
	}
	return d
}
