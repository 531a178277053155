// Package offsets is the node's offset committer: it makes the acked state of each partition
// durable in the partition's directory (consumer.ahead and consumer.offset, under the
// incarnation consumer.id names), and reads it back at recovery. The acked state is the
// committed frontier and the offsets acked above it, and, for redelivery control, the
// delivery attempts of unresolved offsets above the frontier, the quarantined offsets and the
// requeued ones. Its promise: no crash of the process or of the machine recovers a frontier,
// an acked-ahead offset, an attempt count, a quarantined or a requeued offset the live shard
// never held; a process crash delivers again about one tick of acks, a power loss about one
// durability interval plus a tick and the writeout time, and a graceful Close nothing; and a
// Durable wait that returned survives either.
//
// The protocol these files serve, and the invariants cited below, are described in
// docs/protocol.md at the root of the module ("The committer" and "Invariants").
//
// # Usage
//
// The host (the router) creates one Committer per node:
//
//	c, err := offsets.New(offsets.Config{
//		Dir:    func(topic string, p int32) string { return filepath.Join(root, topic, strconv.Itoa(int(p))) },
//		Source: trackerAdapter, // State(topic, p, &into) from the live in-flight shard
//		Logger: logger,
//	})
//	go c.Run(ctx, clock) // or drive c.Tick(now) from a simulator
//	defer c.Close()
//
// The host's duties:
//   - Create a partition's directory before its first ack; the committer never creates one.
//   - On a shard's creation: st, err := c.Load(topic, p); st = c.ClampToWatermark(topic, p, st,
//     hwm); install the shard from st (a new partition, !st.Found, starts at its oldest retained
//     offset minus one), keeping st.Incarnation with it for Source to hand back; then
//     c.MarkDirty(topic, p), so the next tick primes the partition and makes what Load read
//     durable (invariant "monotone across restarts"; see Load).
//   - After every ack, extend, retention jump, quarantine or requeue that changed the acked
//     state, once the shard's lock is released: c.MarkDirty(topic, p). It is cheap, never
//     blocks on I/O, and allocates nothing for a known partition. (Attempt counts change at
//     every lease; they are written with the partition's next window, whatever marked it.)
//   - For an ack that must be on disk before it is answered: MarkDirty, then
//     c.Durable(ctx, topic, p), which returns once a writeout covering it held (see Durable
//     waits below).
//   - On every drop of a shard (a move's reset before and after its install, a reclaim, a
//     retired incarnation): c.Forget(topic, p). Once it returns nothing taken before it is
//     written.
//   - At shutdown, after acks stop: c.Close(). Both files are then exact and durable (a
//     partition whose frontier is still -1 has no consumer.offset; see Cadences).
//
// # Files
//
// A partition's directory holds three files. Each is checksummed and names the partition it
// belongs to, and the two state files name the incarnation too, so that recovery can tell a
// good file from a damaged, foreign or stale one, and, when in doubt, lets records be
// delivered again rather than skip them.
//
// consumer.id names the incarnation of the partition's state: one life of it, from the first
// touch of a partition with no trusted state to the removal of its directory (a topic deleted
// and created again under the name starts a new one). Big-endian, 24 bytes, or 44 when the
// incarnation began by adopting legacy records (below), each 8 bytes longer (32 or 52) when
// the state is bound to the host's incarnation of the topic (below):
//
//	offset  size  field
//	     0     4  magic "NRCI"
//	     4     1  version: 1
//	     5     1  flags: 0x01 the incarnation adopted legacy state (the 44-byte form);
//	              0x02 among it a consumer.ahead record (only with 0x01); 0x04 the state is
//	              bound to a host incarnation (8 more bytes); others 0
//	     6     2  reserved: 0
//	     8     4  partition key (as in consumer.ahead, below)
//	    12     8  incarnation: 64 random bits, never 0
//	    20     4  CRC-32C of bytes 0 to 19 (the 24-byte form)
//
// and in the 44-byte form, from byte 20:
//
//	offset  size  field
//	    20     8  adopted frontier (int64, at least -1): what the legacy records gave
//	    28     8  the adopted record's sequence number (with 0x02; else 0)
//	    36     4  the adopted record's checksum, its slot's bytes 4092 to 4095 (with 0x02;
//	              else 0)
//	    40     4  CRC-32C of bytes 0 to 39
//
// With 0x04, the 8 bytes before the checksum (from byte 20 in the plain form, 40 in the
// adopted one) hold the host incarnation: the host's incarnation of the topic the state is
// bound to (State.HostIncarnation: a Kafka topic ID, a table's row version, as the router
// digests it to 64 bits; never 0). The fields before it keep their places.
//
// The checksum is always the file's last four bytes, over all the bytes before them. A flag
// this release does not know, or a size its flags do not call for, is damage.
//
// The host incarnation tells the lives of a topic apart where consumer.id alone cannot: a new
// life writes its consumer.id at its first prime, which a partition with no state gets only
// with its first ack, so until then a backup of an earlier life restored whole into its
// directory (the earlier consumer.id with it) would be taken for this life's. A host that
// knows its topic's incarnation loads with it (LoadBound): a consumer.id bound to another is
// ignored with every record beside it, logged and counted (Stats.IgnoredFiles), and the
// partition starts as new under a fresh incarnation, delivering its retained records again;
// its prime then replaces that consumer.id, adopting nothing, rather than strand the
// partition. An unbound consumer.id (written before the binding, or under a host that names
// none) is trusted as before and bound at the partition's next prime, its records kept: so an
// unbound backup of an earlier life restored into a new life that has not written its own
// consumer.id is still taken for this life's, as it is for a host that knows no incarnation
// (Load). A consumer.id bound to an incarnation keeps it under a host that names none. A
// power loss during the prime that binds may tear consumer.id: the partition's records are
// then ignored and delivered again, never skipped. A release before the binding takes a bound
// consumer.id (32 or 52 bytes) for damage: a downgrade redelivers each bound partition's
// retained records once.
//
// Load draws a fresh incarnation when consumer.id is missing or damaged; the host keeps it with
// the shard and gives it back through Source, and the prime writes consumer.id and syncs it,
// with the directory, before any record naming the incarnation is written. A valid consumer.id
// naming another incarnation than the live shard's (the directory was replaced or restored
// under it) strands the partition. A host moving a partition copies consumer.id with the other
// two files.
//
// Legacy records are those of releases before consumer.id: slots without tag 5 and the 8-byte
// consumer.offset. They name no incarnation, so consumer.id says which of them its incarnation
// owns: only those it adopted. The upgrade is the first run of this release over a partition
// with legacy records and no valid consumer.id: Load reads them (as recovery does without a
// consumer.id, below), and the prime writes the 44-byte form, naming the legacy record it
// anchors on (by sequence number and checksum) and the frontier the legacy state gave (that
// record's, or the legacy consumer.offset's when there is no legacy slot). Under it that very
// record still counts, and a legacy consumer.offset at or below the adopted frontier, so the
// upgrade keeps its frontier through a crash before this incarnation's first record is
// durable; no other legacy record ever counts under a valid consumer.id. A backup of a deleted
// topic's earlier life restored into the directory of the topic created again, whose
// consumer.id (24 bytes, fresh) adopted nothing, is ignored: the partition delivers again
// rather than skip. Two narrow windows cost a redelivery, never a skip:
//   - The release that introduced consumer.id wrote the 24-byte form at its upgrade. One that
//     crashed after that prime and before its first record naming the incarnation was durable
//     left legacy records beside a consumer.id that did not adopt them: this release ignores
//     them, and the partition delivers its retained records again.
//   - The adopted record is the one the prime read. If the older release crashed before its
//     writeout (its newest record only in the page cache) and the machine loses power during
//     the upgrade's prime, an older legacy record comes back, which is not the one adopted: the
//     partition falls back to a legacy consumer.offset within the adopted frontier, or
//     delivers again.
//
// A downgrade to the release that introduced consumer.id, whose reader refuses a nonzero flags
// byte, takes the 44-byte form for damage: it ignores the partition's records naming the
// incarnation, logs and counts that, delivers the partition's retained records again (or from
// a legacy record still there, the adopted one) and writes a fresh 24-byte consumer.id. So a
// downgrade skips nothing, but costs one redelivery of each partition upgraded from a release
// before consumer.id. The releases before consumer.id ignore the file.
//
// consumer.ahead is 12 KiB: three 4 KiB slots, each holding one checksummed record (older
// releases wrote two, 8 KiB, and read only those; see "Anchor and window" for the third).
// A downgrade to a release that reads two slots takes the newest of slots 0 and 1: where the
// anchor was the third, an older record, and the partition delivers again what was acked
// since; back on this release, a record the older release left in the third slot may outrank
// what it wrote since, with the same effect. Either way records are delivered again, never
// skipped. Integers are big-endian. A slot of version 1 (version 2, below, adds key tails):
//
//	offset  size  field
//	     0     4  magic "NRCA" (0x4E 0x52 0x43 0x41)
//	     4     1  version: 1, or 2 with key tails. A reader refuses a checksummed record of
//	              a higher version than it reads (VersionError) rather than misread or
//	              overwrite it.
//	     5     1  flags: 0 (reserved)
//	     6     2  L: length of the sections that follow the header, 0 to 4060
//	     8     8  sequence number (uint64): of the valid slots the largest is the newest
//	    16     8  frontier (int64, at least -1): every offset up to it is settled
//	    24     4  partition key: CRC-32C of the topic's bytes followed by the partition as an
//	              int32; recovery ignores a record of another partition
//	    28     4  dropped: acked-ahead offsets the writer left out for lack of room
//	              (informational; they are delivered again; the other sets' losses are
//	              counted in Stats only)
//	    32     L  sections
//	  32+L     -  zero padding up to byte 4092
//	  4092     4  CRC-32C (Castagnoli) of bytes 0 to 4091
//
// The magic, the version byte and the checksum's place and coverage stay the same in every
// version. A section is a tag (1 byte), a length (2 bytes) and a payload; tags ascend and
// appear at most once, an empty section is left out, and a version 1 reader skips tags it does
// not know (a later release may add data older readers can ignore; anything they must not
// ignore takes a new version). Varints are unsigned LEB128 (encoding/binary) in their shortest
// form.
//
//	tag 1  acked-ahead offsets, as runs: for each maximal run [start, end] of consecutive
//	       offsets, uvarint(start - prev - 1) then uvarint(end - start), where prev is the
//	       frontier for the first run and the previous run's end after it (so every gap after
//	       the first is at least 1). Every offset lies above the frontier.
//	tag 2  delivery attempts of unresolved offsets above the frontier, ascending: per offset
//	       uvarint(offset - prev - 1) then uvarint(count), prev being the frontier and then the
//	       previous offset; count fits a uint32. Recovery keeps only those above the recovered
//	       frontier and not acked ahead.
//	tag 3  quarantined offsets, as runs (as tag 1) but with prev starting at -1, not the
//	       frontier: they lie on either side of it (the frontier passes over them and they stay
//	       until requeued), each at least 0.
//	tag 4  requeued offsets (quarantined offsets at or below the frontier that wait to be
//	       delivered again), as runs with prev starting at -1, each within [0, frontier]. A
//	       record holding one above its frontier is malformed.
//	tag 5  the incarnation the record belongs to: 8 bytes, never 0. Records of releases
//	       before consumer.id (legacy records) carry none; see consumer.id for when they
//	       count.
//	tag 6  key tails, in version 2 only (below): per tail, ascending by From,
//	       uvarint(From - prev - 1), prev being the frontier and then the previous tail's
//	       From, then the key in 8 bytes.
//
// For example, frontier 10, acked ahead {12, 13}, attempts {11: 3, 14: 300}, quarantine
// {5, 6, 7, 11}, requeued {2, 9} make these 27 bytes of sections
//
//	01 0002 01 01            tag 1: run 12..13 (gap 12-10-1 = 1, extra 1)
//	02 0005 00 03 02 AC02    tag 2: 11 (gap 0) x3; 14 (gap 14-11-1 = 2) x300
//	03 0004 05 02 03 00      tag 3: run 5..7 (gap 5-(-1)-1 = 5, extra 2); 11 (gap 3)
//	04 0004 02 00 06 00      tag 4: 2 (gap 2); 9 (gap 9-2-1 = 6)
//
// Tags 2 and 3 were reserved, and written empty, by the first release of the format, which
// reads tag 3 with prev starting at the frontier and discards what it read (offsets below
// 2^62 keep that read in range, so it does not take the slot for damaged); tag 4 is new, and
// that release skips it. Either way an older version 1 reader recovers the frontier and the
// acked-ahead offsets of a record of this release, and ignores the rest.
//
// Version 2 is version 1 with key tails (State.KeyTails, Record.KeyTails): on an ordered topic
// the shard keeps the records it read and deferred behind a blocked key ("parked") inside the
// acked-ahead runs, so a key blocked for long does not split them into a run per record, and
// the tails say which records of the runs are not settled: every record of key Key (a stable
// 64-bit identity of the record's key, never 0) at or above From that tag 1 holds. At most
// MaxKeyTails (32) tails, ascending by From (strictly: an offset is one record), each From
// above the frontier, no key twice. A version 2 record holds tag 6 with at least one tail; a
// version 1 record holds none (a record without tails is version 1, the very bytes earlier
// releases wrote, so a downgrade reads a node whose ordered topics park nothing). A release
// that reads version 1 only, every release before key tails, would skip tag 6 and take the
// parked records for acked: it refuses a version 2 record as a newer release's instead, and
// its node sets the partition aside. Anything else (a tail breaking the rules, tag 6 in
// version 1, version 2 without it) is a damaged slot. For example, frontier 10, acked ahead
// {12, 13, 20} of which 13 and 20 are parked, of keys 0x0102030405060708 (from 12) and 9
// (from 20):
//
//	01 0004 01 01 06 00                  tag 1: run 12..13; 20 (gap 20-13-1 = 6)
//	06 0012 01 0102030405060708 07 0000000000000009
//	                                     tag 6: from 12 (gap 1), from 20 (gap 20-12-1 = 7)
//
// The tails are never left out for lack of room: their section (at most 3 + 32·18 bytes) and
// the incarnation take their room before any set's, so acked-ahead runs cut for room (whose
// offsets are then unsettled, as a parked one is) leave them whole.
//
// A scattered offset costs 2 bytes and a run 2 to 6, so a slot holds about 2,000 scattered
// offsets and any number in long runs, up to MaxAheadOffsets (2^20) per set. The acked-ahead
// set comes from the Source, and goes to and from a slot, as runs (State.Ahead,
// Record.Ahead: []Run), so neither a tick nor a recovery costs more with a long run than
// with one offset; the bytes are those the offsets make (runs that touch are joined), so
// every release reads them alike. When the sets do
// not all fit, each keeps its lowest offsets and they take the room in this order: requeued
// offsets first (one left out is a record never delivered again after a restart: logged as an
// error), then acked-ahead offsets (delivered again), quarantined offsets
// (they would be settled after a restart, and no longer requeueable) and attempts (counted
// afresh). What is left out is counted (Stats.DroppedRequeued, DroppedAhead,
// DroppedQuarantine, DroppedAttempts) and logged, each kind at most once a minute. The
// sections are still laid out by ascending tag.
//
// consumer.offset is the frontier file operators read. This release writes 32 bytes:
//
//	offset  size  field
//	     0     4  magic "NRCO"
//	     4     1  version: 1
//	     5     3  flags and reserved: 0
//	     8     8  frontier (int64, at least -1)
//	    16     8  incarnation (as in consumer.id)
//	    24     4  partition key
//	    28     4  CRC-32C of bytes 0 to 27
//
// Older releases wrote the legacy form, 8 bytes holding the frontier as a big-endian int64 with
// no checksum and no identity; the two are told apart by their size (an 8-byte file that
// begins with the magic is a torn new one, not a frontier). The levelling after an upgrade
// replaces the legacy form.
//
// Recovery (Load, LoadBound, Recover) trusts what it can verify:
//   - consumer.id must be valid for the records that name an incarnation to count; without it
//     (missing: copied or restored without it; damaged) only legacy records, which name none,
//     count. Under a valid one a legacy record counts only when its incarnation adopted it
//     (see consumer.id): where consumer.id and a slot disagree, the slot does not win.
//     Records of another partition or incarnation never count.
//   - It takes the newest counting slot, then the larger of its frontier and a counting
//     consumer.offset's. A legacy consumer.offset counts only when no slot does (an older
//     release levels it with the slots, never ahead of them), and its frontier is marked
//     Unverified: ClampToWatermark takes one at or above the log's high watermark for damage and
//     starts the partition afresh rather than clamp it (a verified frontier there is a log that
//     lost its tail, and is clamped).
//   - Under LoadBound, a consumer.id bound to another host incarnation than the host's is an
//     earlier life's: nothing in the directory counts (see consumer.id).
//   - Whatever it ignored is logged as an error and counted (Stats.IgnoredFiles): a damaged or
//     foreign file, a consumer.ahead that is present but has no usable slot (short, torn,
//     every slot bad), and a legacy record consumer.id did not adopt where it would have been
//     taken before consumer.id said which count: a slot newer than the slot taken, if any, or
//     a consumer.offset with no slot taken (the field legacy_under_incarnation counts them; a
//     legacy slot older than the slot taken changes nothing and is passed over silently, as
//     the previous anchor of an upgrade is). Blank slots (a prime's extension before its
//     first window) are no damage.
//
// Inspect and InspectFiles give the same reading file by file and slot by slot, with what
// recovery makes of each and why, for an operator's tool (cmd/consumestate); they never write.
//
// Acked-ahead offsets and attempts at or below the recovered frontier are settled, and so are
// the attempts of offsets acked ahead (a parked one's attempts are counted afresh). The key
// tails come back with the runs of the slot taken; when the recovered frontier passes a tail
// (a consumer.offset ahead of the slot), which records of that key above it are parked cannot
// be told, and the runs and the tails are both dropped: every record above the frontier is
// delivered again, none skipped. The quarantine comes back as
// written, and the requeued offsets all (they lie at or below the slot's frontier, so at or
// below the recovered one). Every set comes from the one slot chosen, never a mix of slots:
// the newest-valid-slot rule applies to the whole record. A short consumer.ahead (an older
// release's two slots; a move's copy carries slot 0 only) is read as far as it goes.
// ClampToWatermark drops offsets at or above the high watermark from every set, and the key
// tails from there.
//
// # Cadences
//
// Every tick (T = 100 ms, or the durability interval D when shorter) each partition marked since
// the last tick gets a fresh record, pulled from its live shard through Source, written into its
// window slot through a descriptor the committer holds, with no sync: the page cache, which a
// process crash does not lose. A partition whose shard is gone gets nothing.
//
// Every durability interval (D, 1 s by default, 10 ms to 60 s) each partition written since is
// written out once (fdatasync on Linux; fsync then one F_FULLFSYNC per device per tick on macOS,
// the FullSyncer capability), at its turn: the tick whose number modulo D/T equals its partition
// key modulo D/T, which spreads writeouts over the interval. A partition whose writes waited a
// whole interval goes on the next tick whatever its turn. A writeout batch syncs four
// partitions at once (one under a descriptor cap below 64), and batches run one at a time.
//
// Under Run the tick only writes windows: it hands the due partitions, as one batch, to a
// writeout worker (syncs, device flush, flips, levellings) and never waits for it; while a
// batch is in flight the next waits, and a batch still running at the next tick is counted
// (Stats.SlowWriteouts) and logged with the overrun line. A partition whose window's sync is in
// flight still gets its record each tick, written into its spare slot (see "Anchor and
// window"; Stats.WrittenToSpareSlots): no page-cache write waits for a sync, and no sync is
// spoiled by a write, so durability does not starve under syncs slower than T with acks every
// tick. A Tick called without Run does all of it inline, in a fixed order, as a simulator
// needs.
//
// consumer.offset is brought level with the anchor's frontier at a writeout, or on a quiet
// partition's turn, at most every 30 s, and by Close. It is only ever levelled with a record
// this committer wrote out, so it never leads consumer.ahead's durable frontier (except after a
// failed device flush) and never undercuts what a restart loaded. A frontier of -1 is not
// written into a consumer.offset that does not durably hold a frontier yet: that write would
// create or extend the file, and a power loss can keep a file's new size without its bytes,
// eight zeros that read as frontier 0, an offset never acked. A missing consumer.offset says as
// much (consumer.ahead holds the frontier).
//
// A Durable wait makes its partition due at once, whatever its turn (see below).
//
// Under Run the committer ticks only while there is work: a partition marked since the last
// tick, written and not yet written out, queued for its prime, a Durable wait, or a levelling
// due. With none it arms no timer and sleeps until MarkDirty (the first mark of a partition
// since the last tick) or Durable wakes it, or until the earliest levelling of a quiet
// partition falls due; a mark then gets its tick one period after the last one, or at once if
// that has passed. So an idle node makes no wakeups, and while writes wait for their writeout
// the cadence, the turns and the whole-interval rule hold as above.
//
// Warnings, each at most once a minute, with fixed words and fields: a tick that took
// longer than T (Run measures it; inline priming ticks do not count; the next tick then starts
// at once) or a writeout batch still running at the next tick, and writes that waited more than
// 2·D for their writeout; and partitions whose first window waited more than a tick for their
// prime (Stats.SlowPrimes).
//
// # Anchor and window
//
// The anchor slot holds the newest record known durable and is never written while it is the
// anchor; ticks write only the window (invariant "slot discipline"). A writeout syncs the
// window, and while that sync runs no tick writes the slot it syncs: a tick then writes the
// third slot, the spare, which becomes the window. A writeout that succeeds, with its device
// flush, makes the synced slot the anchor; the old anchor becomes the window, or, when ticks
// went on in the spare meanwhile, the spare stays the window and its writes wait for the next
// writeout. Until a tick meets a sync, slots 0 and 1 take turns as in a file of two slots;
// from then on the roles rotate through all three. Each record written takes a sequence
// number above those of the other two slots, so recovery takes the newest record written
// (after a process crash, a spare written during a sync), and after a power loss a valid slot
// that outranks the anchor holds a record written after it. A writeout that fails
// leaves the anchor alone, and the next tick rewrites the window in full, acked or not,
// whichever slot it is (a spare written during the failed sync included): after a failed
// sync the page cache is not trusted, since Linux may have dropped the dirty pages and
// reports the error once, so that a later sync "succeeds" persisting nothing (fsyncgate). A
// flip therefore needs a whole window rewrite followed by a successful sync with no failed
// sync in between. Under a persistent failure acks are still accepted and windows still
// written, and the lag warning fires.
//
// A partition's first touch after a start, or after Forget, primes it before any window write:
// pin the directory, open or create consumer.ahead inside it, check the path still names the
// pinned directory, extend a short file to 12 KiB, read its slots, anchor on the newest valid
// one, rewrite its bytes and those of a valid consumer.offset, and sync both and the directory,
// with one device flush for all the primes of the tick. The rewrite matters: the newest record
// may sit only in the page cache, clean but not durable (a crashed process before its writeout,
// or fsyncgate), and a sync with nothing dirty persists nothing; without the prime's writeout
// the first window would overwrite another slot, possibly the only durable record. The
// extension matters too: a spare write never grows the file, so a full disk cannot refuse
// it. The directory is synced even when the file existed, since a file created by a process
// that crashed before its directory sync looks like an old one. Primes go in chunks (up to 256)
// with one directory sync per directory per chunk; under Run a pool of 16 goroutines runs
// them, off the tick, and each chunk that completes wakes Run for a tick at once, which writes
// the first windows of its partitions; inline, one at a time, before the tick's windows. A prime that fails (ENOSPC on the
// extension, say) leaves the partition unprimed, retried on the next tick, and nothing is
// written into its window meanwhile.
//
// A blank directory (consumer.ahead missing or empty, no consumer.offset, consumer.id missing
// or empty) holds no record to protect: its prime creates the files and writes consumer.id,
// syncs nothing, and the partition takes windows at once. It owes the syncs to its first
// writeout, which makes the directory's entries, consumer.id and the directory's own entry in
// its parent and grandparent durable before it syncs the window and may flip
// (Stats.BlankPrimes), writing consumer.id again before each try, since a failed sync may
// have dropped its bytes (fsyncgate). A power loss before that leaves files recovery takes for no state, or a
// record without its consumer.id, whose incarnation Load does not trust: delivered again,
// never skipped.
//
// # Durable waits
//
// Durable(ctx, topic, p) returns once every change to the partition's acked state reported by
// MarkDirty before the call is durable: a window whose snapshot was taken after the call has
// been written out, with its device flush, and flipped to be the anchor. The call registers a
// small waiter record (no goroutine per waiter), marks the partition and wakes Run at once:
// the tick takes a fresh snapshot, writes the window, and hands the partition's writeout to
// the worker whatever its turn (Stats.EarlyWriteouts), so a lone wait lasts one window write
// and one sync, not a tick. Each snapshot is numbered; a waiter remembers the number when it
// registered, and a flip answers exactly the waiters registered before the flipped window's
// snapshot, as soon as that partition flips (not at the end of its batch, except where a
// device flush must come first). It is a group commit, as a database's log does it: while a
// sync of the partition's window runs, the waiters that came meanwhile wait (the ticks write
// their acks into the spare slot, leaving the synced one alone), and when the batch ends the
// worker wakes Run at once, whose tick writes one window for all of them and starts their
// one sync. Under load a sync answers every wait that arrived during the one before it. A
// waiter registered while the tick holds its snapshot waits for the next writeout. A
// writeout batch already running (other partitions' syncs, a levelling) delays the start.
//
// A failed sync or device flush answers nothing: the waiters wait for the next writeout that
// holds, which the fsyncgate rule makes a whole window rewrite followed by a successful sync.
// Other answers: ctx's error when ctx is done first (the waiter is withdrawn); a
// *PartitionError (Op "durable") matching ErrShardGone when Forget drops the partition or a
// tick finds its shard gone; one matching ErrStranded when the partition is, or becomes,
// stranded; ErrClosed after Close. Close answers the waiters its writeout covers with nil, and
// the rest with ErrClosed joined with its error. Durable needs a committer that ticks.
//
// # Stale shards and replaced directories
//
// A partition directory can be replaced or removed under the committer (a move installs a
// copy, a reclaim quarantines one, a delete and recreate sets the old one aside). Four
// rules keep a stale shard's acks out of the new directory:
//   - A tick takes the state of each marked partition from the live shard and writes nothing for
//     one whose shard is gone.
//   - Forget drops the partition's descriptor and state and waits for a write or sync of it in
//     progress; a tick holding a snapshot taken before finds it forgotten and drops it.
//   - Nothing is written by path into a directory the committer did not prime. A prime and a
//     levelling pin the directory (os.OpenRoot), open the file inside it (creating it there only)
//     and keep it only if the path still names the pinned directory, by device and inode; a
//     reopen of an evicted descriptor goes by path, never creates, and is refused unless the
//     path names the directory and the file the prime opened. A missing directory is never
//     created. A partition whose path is gone or names another directory or file is stranded:
//     nothing is written for it until its next Forget, and a fixed line is logged once (with
//     topic and partition). A stat failing otherwise (EIO, ESTALE, EACCES) is an ordinary error,
//     retried next tick with the identity checks done again.
//   - (The create fence around drops is the tracker's.)
//
// # Descriptors
//
// At most min(4096, soft RLIMIT_NOFILE / 4) descriptors (at least 5) are open at once, counting
// every one: consumer.ahead descriptors held between ticks, one-shot ones, those of primes and
// levellings, and directory roots (Stats.OpenDescriptors); the host keeps three quarters of
// its limit. Held ones stay under the cap less a reserve (max(4, min(cap/2, max(52, cap/8)))) for the
// others. Past that the committer closes the held one written longest ago among partitions
// whose window is durable, and when there is none, writes through a one-shot descriptor,
// closed right after its write or sync. An open that finds no room is put off: a window write
// to the next tick (Stats.DeferredWrites), a prime to the next chunk.
//
// # Crash windows
//
// After a process crash the page cache survives: recovery finds the last window written, so the
// acks of about one tick are delivered again, whatever the syncs take (under Run: a tick that
// meets a sync writes the spare slot). One exception: a partition whose directory held state
// has its acks wait for its prime (a blank one's do not) (counted and logged when more than a
// tick). Driven inline by Tick, the window trails by the
// previous tick's syncs too. After a power loss or a kernel crash only what was written out
// survives: up to about D + T + the writeout time of acks are delivered again; a slow disk
// widens that by however long the writeout batches queue behind each other (a batch of n
// partitions takes n syncs), which the overrun and late-writeout warnings report; a window
// or spare torn by the power loss fails its checksum and recovery falls back to the anchor. A
// graceful Close writes out and levels every partition: nothing acked is delivered again.
// consumer.offset is written in place within one sector; a torn or bit-flipped one fails its
// checksum and is ignored, like a torn slot. No single-bit flip and no truncation of any of the
// three files recovers a frontier past a record that was not acked.
//
// # Implementation notes
//
// One goroutine ticks; under Run a writeout worker (syncing up to four partitions at once)
// and a prime pool (a coordinator and up to 16 goroutines per chunk) run beside it, started
// by Run and stopped, after their work in flight, when it returns; Close waits for that work
// before its final pass. Locks: tickMu
// serializes Tick and Close; ioMu guards the partitions' file state and what Forget shares
// with the others (the descriptors, the forgotten flag), and is held for one partition's
// page-cache write, or an open, read and its checks, at a time: never across a sync, and
// never while calling Source, so Source may take the shard's lock and Forget waits for at
// most one partition's write (a sync in flight finishes on the old descriptor, closed at the
// end of its batch); a partition's fileMu is held instead by a prime's opens, reads and
// page-cache writes (and by the opens of the syncs a blank prime owes), which Forget waits
// for, so that the pool's syscalls never hold up the tick's writes of other partitions;
// primeMu guards the pool's queue; markMu guards the changes of the partition map, the
// marked list and the Durable waiters, and is held only for in-memory work. The order is
// tickMu, ioMu, a partition's fileMu, primeMu, markMu. MarkDirty of a partition already marked
// since the last tick takes no lock: the map is a sync.Map and the mark an atomic flag, set
// and cleared under markMu; the tick clears a mark before it asks the Source, so a mark seen
// set is one whose change the tick has yet to snapshot, and Forget moves a mark it finds to
// the partition's fresh state (a sharded RWMutex would not do: its RLock still writes a
// shared reader count, which a hot partition's acks would contend on). Source is called only by the tick. An atomic counter numbers the Source's snapshots for the Durable waits, and a
// per-partition atomic count of waiters lets the tick decide a writeout without markMu. A
// steady tick allocates nothing. Time enters only as Tick's now and Run's Clock; Durable is
// purely event-driven inside a tick.
package offsets
