// Package wire is the node-to-node frame codec of narad.dev/consume: the request frames a node
// sends another (forwarded acks, and the frames of cross-node consumption) and the two reply
// formats. It encodes and decodes only: what a frame means, and what a node does with it, is
// package router's business (see docs/protocol.md, "Forwarded acks and the node wire").
//
// Integers are big-endian; a duration is an i64 of nanoseconds; a time is an i64 of Unix
// nanoseconds, 0 for the zero time.
//
// # Versions
//
// Each Version adds to the one before, and a node decodes at the newest version it speaks:
//
//	V1  Ack (1), Extend (2), Nack (3)
//	V2  AckBatch (4)
//	V3  Consume (5), Cancel (10), Replay (11)
//	V4  Register (6), Notify (7), Pass (8), Drop (9): delivery tokens
//	V5  Consume's Claim byte
//	V6  Consume's Max
//	V7  Release (12), ExtendLeft (13), AckDurable (14); Consume's flags byte (relative expiry)
//	V8  ConsumeBatch (15): the consumes of several consumers of one topic in one frame
//	V9  headers in deliveries: the Headers flag (bit 1) of Consume's and a ConsumeBatch
//	    member's flags byte, and Replay's flags byte; the consume reply's headers mark
//	V10 Reject (16): a settle that quarantines the record at once
//	V11 Confirm (17); Consume's Reserve flag (bit 2 of Consume's and a ConsumeBatch
//	    member's flags byte): reservations, whose attempt counts only once confirmed
//	V12 Status (18), Purge (19): a topic's partitions counted and purged at their owner
//	V13 AckBatches of up to MaxLargeBatch records (MaxBatch before)
//	V14 NackNow (20): a nack that makes the record visible at once, whatever the backoff
//	V15 Status's flags byte (bit 0: the status reply carries each partition's spilled keys
//	    and records)
//	V16 Acks (21): plain acks in a compact form, answered by the acks reply; Consume's Acks
//	    flag (bit 3 of its flags byte): plain acks that ride with a consume; the Compact
//	    flag (bit 4 of Consume's and a ConsumeBatch member's flags byte): the compact
//	    consume reply
//
// Version 7 is there so that no clock crosses the wire (an owner's expiry can reach a
// requester as a duration, the lease's time left) and so that every settle of a lease can be
// forwarded. Version 9 carries the records' headers: a requester asks for them with the
// Headers flag, and only then does an owner send them (a requester before V9 could not read
// them, so its deliveries come without: the headers are lost to it). Version 10's Reject has
// no older form: a requester never sends an owner of an older version a reject as some other
// settle. Version 11 is for a gateway that reads ahead for its consumers: it asks an owner
// for reservations (the Reserve flag), deliveries whose attempt the owner counts only once
// the gateway confirms (Confirm) that a consumer got the record; those it does not hand over
// it gives back with Release, as if never granted. A requester never asks an owner of an
// older version for reservations, nor sends it a confirm. Version 12 lets a node count and
// purge a topic whose partitions other nodes own: one frame per owner names many partitions,
// and the owner answers each (its status, nothing in it a time; or its purge, once on the
// owner's disk). An older owner refuses the op, and its partitions go uncounted or
// unpurged: no other op stands in. Version 13 lets an AckBatch carry a consume's whole batch
// (up to MaxLargeBatch records) in one frame; an older release refuses a batch past MaxBatch
// as malformed, as it reads the count, and a requester then sends that owner batches of
// MaxBatch. Version 14's NackNow nacks a lease with no delay and no backoff (the record is
// visible at once, its delivery counted); an older owner refuses the op, and a requester
// sends it a plain Nack with no delay instead, which waits the topic's backoff there.
// Version 15 lets a Status ask for each partition's spilled keys and records (an ordered
// topic's hot or hung keys); an older owner refuses the flags byte as trailing data, and a
// requester asks that owner again without it: those counts are then zero. Version 16 carries
// plain acks (of no argument) compactly, alone (Acks) or riding in a Consume (its Acks flag,
// the acks after the flags byte), and answers them with a count of those applied and the
// answers of only the others; an older owner refuses the op (ErrUnsupportedOp) or the flag
// (ErrBadFrame, "flags byte"), applying none of the acks, and a requester then sends them as
// an AckBatch, in a frame of their own. A requester asks for the compact consume reply (the
// deliveries' fixed fields as varints, most of them differences from the delivery before,
// about 20 bytes a delivery besides its key, value and headers instead of 57) with the
// Compact flag, and only then does an owner send it; an older owner refuses the flag.
//
// A frame whose op is newer than the decoder's version (or that no version knows) is
// ErrUnsupportedOp; an AckBatch carrying a record of such an op is ErrBadFrame. A Consume
// carrying a trailing field newer than the version is ErrBadFrame ("trailing data"), exactly
// as an older release that does not know the field answers it (V6 reads the Max of 1 that
// only a flags byte follows as out of range, "max 1", as a V6 release does), and so is a
// Replay's flags byte below V9, and a flag bit newer than the version ("flags byte": V7 and
// V8 know bit 0 alone, V9 and V10 bits 0 and 1, V11 to V15 bits 0 to 2; a ConsumeBatch
// member never bit 3). Everything else malformed is
// ErrBadFrame too. An encoder always writes the newest form of a request; a field it need not
// write is left out (a Consume of one record without a claim is byte for byte the V3 frame),
// and a requester talking to an older node drops the newer fields itself.
//
// # Request frames
//
// Every request starts with a header: the op byte, then the topic (u16 length, then at most
// MaxTopic bytes). After the header:
//
//	Ack, Extend, Nack, Release, ExtendLeft, AckDurable, Reject, Confirm, NackNow
//	                   one record: partition i32, offset i64, nonce u64, argument (a duration:
//	                   the extension of an Extend or ExtendLeft, the delay of a Nack; 0 for the
//	                   others)
//	AckBatch           u16 count (1 to MaxBatch; to MaxLargeBatch from V13), then per record: its op byte (1 to 3, 12
//	                   to 14 from V7, 16 from V10, 17 from V11, 20 from V14), the record, and its budget
//	                   (a duration: what was left of the record's budget when the frame left)
//	Consume            request id u64, pinned partition i32 (-1: any partition), visibility (a
//	                   duration, 0: the topic's), then optionally the Claim byte (0 or 1), then
//	                   optionally, after the Claim byte, Max i32 (at least 2; at least 1 when
//	                   the flags byte follows), then optionally, after Max, the flags byte
//	                   (bit 0: RelativeExpiry; bit 1, from V9: Headers; bit 2, from V11:
//	                   Reserve; bit 3, from V16: acks, an Acks frame's body following the
//	                   flags byte; bit 4, from V16: Compact; the other bits zero; written
//	                   only with a flag set)
//	Acks               u16 count (1 to MaxLargeBatch), budget (a duration, positive: the
//	                   acks' least), then runs of records of one partition, in order:
//	                   partition (uvarint), the run's length (uvarint, at least 1), the
//	                   first offset (uvarint) and nonce u64, then per other record its
//	                   offset's difference from the one before (zigzag varint) and nonce
//	                   u64; the runs hold count records
//	ConsumeBatch       u16 count (1 to MaxConsumeBatch), then per consume: request id u64,
//	                   pinned partition i32, visibility (a duration), the Claim byte (0 or
//	                   1), Max i32 (at least 1), the flags byte (bit 0: RelativeExpiry; bit
//	                   1, from V9: Headers; bit 2, from V11: Reserve; bit 4, from V16:
//	                   Compact; the other bits zero) and its budget (a duration, positive:
//	                   what was left of the consume's budget when the frame left), every
//	                   field written
//	Replay             partition i32, offset i64, limit i32 (none negative), then optionally
//	                   (V9) the flags byte (bit 1: Headers, the other bits zero; written only
//	                   with it set)
//	Cancel             request id u64
//	Register           an empty topic in the header, then u16 count (1 to MaxRegistrations),
//	                   then per entry: topic (u16 length, 1 to MaxTopic bytes), ttl (a
//	                   duration, positive)
//	Notify             hold (a duration, positive): how long the owner holds the record for a
//	                   claim
//	Pass, Drop         the header alone
//	Status, Purge      u16 count (1 to MaxPartitions), then each partition i32, ascending,
//	                   none negative or repeated; a Status then optionally (V15) the flags
//	                   byte (bit 0: StatusSpilled, the other bits zero; written only with it
//	                   set)
//
// No frame has bytes after its last field, and none is longer than MaxFrame.
//
// # Reply frames
//
// The ack reply answers the ack ops (Confirm and NackNow among them), Register (an answer per entry),
// Notify, Pass, Drop, Cancel and Purge (an answer per partition, in the request's order),
// and a refusal of a whole frame of any op (a reply of one answer): u16 count, then
// per answer a status byte, an i64 (the new expiry of an extend (a time), or, for ExtendLeft,
// the lease's time left (a duration), or, for a Purge, the offsets the partition's frontier
// moved over; else 0) and a message (u16 length, at most MaxMessage bytes). A partition's
// answer to a Purge is never the unsupported status: a reply of one answer with it is the
// refusal of the whole frame.
//
// The acks reply (V16) answers Acks, and the acks of a Consume carrying them, the consume
// reply then following it: a mark byte (0xC9), the count applied (u16), the count not
// (u16), then per ack not applied, indexes ascending: its index (u16), a status byte (not
// StatusOK) and a message. A refusal of the whole frame is an ack reply of one answer.
//
// The consume reply answers Consume and Replay: a mark byte (0xC5, which no ack reply begins
// with, so a refusal in the ack reply format reads apart), a status byte, a message (u16
// length, at most MaxMessage bytes), a u32 count, then per delivery: partition i32, offset i64, nonce u64,
// attempt u32, reason u8, expiry (a time, or, answering a Consume with RelativeExpiry, the
// lease's time left: a duration), fence u64, timestamp (a time), key (u32 length,
// bytes), value (u32 length, bytes). A reply some delivery of which carries headers (V9,
// sent only to a requester that asked with the Headers flag) opens with another mark, 0xC7,
// and every delivery's value is then followed by its headers: a u32 count (0 for one
// without), then per header a key (u32 length, bytes) and a value (u32 length, bytes), in
// the record's order. A reply of the headers mark with no header in it is malformed: each
// reply has one form.
//
// A consume reply answering a consume with the Compact flag (V16) opens with a mark of its
// own, 0xCA (0xCB when some delivery carries headers), then the status byte, the message,
// the count (uvarint), then per delivery: the partition's and the offset's differences from
// the delivery before (zigzag varints; the first's from zero), nonce u64, attempt (uvarint,
// at most 32 bits), reason u8, the differences of the expiry, the fence and the timestamp
// (zigzag varints, wrapping), key and value (each a uvarint length and the bytes), and with
// the 0xCB mark the headers (a uvarint count, then per header a key and a value, each a
// uvarint length and the bytes). Every varint is as short as its value allows.
//
// The consume batch reply answers ConsumeBatch: a mark byte (0xC6), a u16 count (the
// request's), then per consume, in the request's order, a u32 length and that consume's
// consume reply. A refusal of the whole frame is an ack reply of one answer.
//
// The status reply answers Status: a mark byte (0xC8), a u16 count (the request's), then
// per partition, in the request's order: partition i32, a status byte and a message (u16
// length, at most MaxMessage bytes); when the status is 0 (counted), then: loaded u8 (0 or
// 1), frontier i64 (-1: not known), high watermark i64 (-1: not known), backlog i64, the
// oldest unsettled record's age (a duration, -1: not known), thirteen u32 counts (leased,
// delayed, acked ahead, quarantined, requeued, held keys, blocked keys, deferred, parked
// keys, parked, consumers parked on the topic, on the partition, quarantined keys), how long
// the key blocked longest has been blocked (a duration, 0: none), the partition's error as a
// status byte (0: none) and a message, the set-aside error's message (empty: not set aside)
// and the time left before its retry (a duration, 0 when not set aside), then, when the
// Status asked for them (V15), two u32 counts: spilled keys and spilled records. A refusal
// of the whole frame is an ack reply of one answer.
//
// Decoders never panic, and never allocate more than the frame's length justifies: every count
// (a delivery's headers included) and every length is bounded by the bytes left.
package wire
