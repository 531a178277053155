package router

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"

	"narad.dev/consume/inflight"
)

// ErrOtherIncarnation: bytes given to Adopt are bound to another incarnation of the topic
// than the one the host's TopicIncarnation names now (an earlier life's state, say). Adopt
// answers it wrapping ErrInvalidArgument; nothing changed.
var ErrOtherIncarnation = errors.New("router: the state belongs to another incarnation of the topic")

// hostIncarnation is the host's incarnation of topic as the node binds state to it (see
// TopicIncarnation): its digest, or 0 when the host has no TopicIncarnation or names none.
func (n *Node) hostIncarnation(topic string) uint64 {
	if n.incarnations == nil {
		return 0
	}
	id, ok := n.incarnations.Incarnation(topic)
	if !ok || id == "" {
		return 0
	}
	return incarnationDigest(id)
}

// incarnationDigest is what the state files and the store's bytes keep of the host's id: 64
// bits of its SHA-256, never 0 (0 is "unbound"). Two ids collide with probability 2^-64.
func incarnationDigest(id string) uint64 {
	sum := sha256.Sum256([]byte(id))
	return max(binary.BigEndian.Uint64(sum[:8]), 1)
}

// unnamedIncarnation refuses a state bound to a host incarnation of topic when the host,
// which offers TopicIncarnation, names none for the topic now: its contract is to name the
// same one for the topic's whole life, so the node cannot tell this life's state from an
// earlier one's. Nothing is loaded or adopted; the next touch asks again.
func (n *Node) unnamedIncarnation(topic string, partition int32, bound uint64) error {
	return n.hostFault(topic, partition, fmt.Errorf(
		"%w: TopicIncarnation.Incarnation(%q) named none, yet the state of %s/%d is bound to host incarnation %016x",
		ErrHostContract, topic, topic, partition, bound))
}

// checkLoadedIncarnation is loadState's check of a loaded state's binding, host being what the
// host named before the load (0: none): the committer already ignored a state bound to
// another incarnation; a bound one the host cannot name is refused.
func (n *Node) checkLoadedIncarnation(topic string, partition int32, host, bound uint64) error {
	if n.incarnations != nil && host == 0 && bound != 0 {
		return n.unnamedIncarnation(topic, partition, bound)
	}
	return nil
}

// bindAdopted checks the binding of a state given to Adopt against the host's incarnation of
// the topic, and binds an unbound one to it (the state of a node before the binding, or one
// without it, adopted here as an upgrade): a state bound to another incarnation answers
// ErrOtherIncarnation, and a bound one the host cannot name ErrHostContract. Without
// TopicIncarnation the state is adopted as it is.
func (n *Node) bindAdopted(topic string, partition int32, st *inflight.State) error {
	if n.incarnations == nil {
		return nil
	}
	host := n.hostIncarnation(topic)
	switch bound := st.HostIncarnation; {
	case host == 0 && bound != 0:
		return n.unnamedIncarnation(topic, partition, bound)
	case host != 0 && bound != 0 && bound != host:
		return fmt.Errorf("%w: %w: the state of %s/%d is bound to host incarnation %016x, the host names %016x",
			ErrInvalidArgument, ErrOtherIncarnation, topic, partition, bound, host)
	case host != 0:
		st.HostIncarnation = host
	}
	return nil
}
