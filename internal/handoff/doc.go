// Package handoff is the codec of a partition's state as it moves from one owner to the next:
// the bytes router.Node.HandOff returns and router.Node.Adopt installs. It encodes and decodes
// only; what a move means (the fence, the durability, what the new owner honours) is package
// router's business (see docs/protocol.md, "Moving a partition").
//
// The bytes are self-verifying and self-identifying: a version, the partition they belong to
// (topic, partition, incarnation) and a CRC-32C of everything before it. Nothing absolute
// crosses between the two nodes: a lease's expiry and a delay's end travel as the time left at
// the encoding, and a lease's grant as its age, so the new owner's clock reads them against its
// own now, and no clock error between the two shortens a lease.
//
// # Format, version 1
//
// Integers are big-endian; a uvarint is encoding/binary's unsigned LEB128.
//
//	offset  size  field
//	     0     4  magic "NRCH"
//	     4     1  version: 1. A decoder refuses another (ErrVersion).
//	     5     1  flags: bit 0 set for a live hand-off (Held carries the leases); clear for a
//	              state read from durable files (a failover: no leases). Bit 1 set for a
//	              state bound to the host's incarnation of the topic, bit 2 for a state kept
//	              under an ownership epoch, bit 3 for a state with key tails (the trailing
//	              fields below). Other bits are 0.
//	     6     2  T: length of the topic's name, 1 to 65535
//	     8     T  the topic's name
//	   8+T     4  partition (int32, at least 0)
//	  12+T     8  incarnation (the consumer.id the state belongs to; never 0)
//	  20+T     8  id: names this hand-off (random, never 0), so that an adopter can tell a
//	              retried adoption of the same bytes from a different state
//	  28+T     8  frontier (int64, at least -1)
//	  36+T     8  fence: the latest fencing token granted
//	  44+T     -  sections, each a uvarint count and that many entries, in this order:
//	                acked ahead: uvarint(offset - prev - 1), prev the frontier, then the
//	                  previous offset (ascending, above the frontier)
//	                attempts: uvarint(offset - prev - 1), prev as above, then uvarint(count)
//	                quarantined: uvarint(offset - prev - 1), prev starting at -1
//	                requeued: as quarantined; each at or below the frontier
//	                held: uvarint(offset - prev - 1), prev starting at -1; the nonce (8 bytes,
//	                  0 for an offset not leased); a kind byte (0 released, 1 leased,
//	                  2 delayed); uvarint(attempts); the reason byte; for a lease or a
//	                  delay uvarint(nanoseconds left until its expiry or end); for a lease
//	                  uvarint(nanoseconds since its grant)
//	                corrupt: offsets skipped as unreadable, as acked ahead
//	              with flag bit 1 only: 8 bytes, the host's incarnation of the topic the state
//	                is bound to (as the node digests the host's answer; never 0)
//	              with flag bit 2 only: 8 bytes, the ownership epoch the state was kept under
//	                (router.Grant.Epoch; never 0)
//	              with flag bit 3 only: the key tails (inflight.State.KeyTails), a uvarint
//	                count, 1 to 32, then per tail uvarint(From - prev - 1), prev the frontier
//	                and then the previous tail's From (ascending, above the frontier), and the
//	                key in 8 bytes (never 0, no key twice)
//	   n-4     4  CRC-32C (Castagnoli) of bytes 0 to n-5
//
// A state with no host incarnation, no epoch and no key tails sets none of bits 1 to 3 and has
// no trailing field, so it is the same bytes as before the fields existed. A release before
// them refuses such a bit as damage (ErrDamaged): an Adopt there changes nothing, and a state
// store's load ignores the state loudly and delivers the partition's retained records again;
// neither skips a record. For the key tails that refusal is what keeps an ordered topic's
// parked records, which the acked-ahead offsets hold, from being read as acked.
//
// Every count is bounded by the bytes left (an entry takes at least one byte), so a decoder
// allocates no more than its input warrants. Anything else (a short or long buffer, a bad
// checksum, an offset out of order or out of range, a kind or reason no version defines, a
// count that does not fit) is ErrDamaged.
package handoff
