package delivery

import (
	"cmp"
	"fmt"

	"narad.dev/consume/examples/internal/queueclient"
)

// A Position is where a record is: partition and offset.
type Position struct {
	Partition int32
	Offset    int64
}

func (p Position) String() string { return fmt.Sprintf("%d:%d", p.Partition, p.Offset) }

// Compare orders positions by partition, then offset (for slices.SortFunc).
func Compare(a, b Position) int {
	return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
}

// An Outcome is how a delivery ended, as far as its client knows.
type Outcome uint8

const (
	Held       Outcome = iota // delivered; the client has not settled it yet
	Acked                     // the ack was answered 204
	AckSettled                // the ack was answered already_settled (410): an earlier ack took it
	AckUnsure                 // the ack got no answer (no reply, 502): the owner may have applied it
	AckRefused                // the ack was refused unapplied (503: the owner was down, or between owners)
	AckLate                   // the ack was answered gone (410): the lease had lapsed first, or was dropped
	Nacked                    // nacked: visible again at once
	Abandoned                 // never settled: delivered again once its lease lapses
)

// answerOutcomes are the outcomes of an ack's answers.
var answerOutcomes = [...]Outcome{
	queueclient.Acked: Acked, queueclient.Settled: AckSettled, queueclient.Late: AckLate,
	queueclient.Refused: AckRefused, queueclient.Unsure: AckUnsure, queueclient.Rejected: Held,
}

// OutcomeOf says how an ack answered err ended (see queueclient.AckAnswer). An answer the
// consume API gives only to a wrong call is an error.
func OutcomeOf(err error) (Outcome, error) {
	a := queueclient.AckAnswer(err)
	if a == queueclient.Rejected {
		return Held, fmt.Errorf("ack: %w", err)
	}
	return answerOutcomes[a], nil
}

// Records is a ledger's records, by position: R is the ledger's own record.
type Records[R any] map[Position]*R

// At returns the record at pos, adding a zero one.
func (rs Records[R]) At(pos Position) *R {
	r := rs[pos]
	if r == nil {
		r = new(R)
		rs[pos] = r
	}
	return r
}

// Any reports whether a record satisfies f.
func (rs Records[R]) Any(f func(*R) bool) bool {
	for _, r := range rs {
		if f(r) {
			return true
		}
	}
	return false
}
