// Package cancelmemory is an owner's side of the cancel race of a forwarded consume: a
// requester whose consume was cancelled while the owner's reply was in flight names its
// request in a Cancel frame, and the owner gives back every record that reply carried, at
// once, rather than when their leases lapse.
//
// A Memory remembers, for a fixed TTL on the owner's own clock, the receipt handles of each
// reply, keyed by the requesting node and its request id (ids are the requester's, so the
// same id from two nodes names two requests). Remember records a reply; Take hands back
// what a request's replies carried and forgets them. A Cancel that comes after the TTL finds
// nothing. The owner (package router) chooses the TTL: long enough to outlive the latest
// Cancel a requester sends, short enough that the replies held stay few, since every reply
// is held that long.
//
// Each call costs O(1) amortized and allocates nothing per reply at the memory's working
// size (see Memory for how); time is given, never read.
package cancelmemory
