package delivery

import (
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/examples/internal/queueclient"
)

func TestPosition(t *testing.T) {
	require.Equal(t, "3:41", Position{3, 41}.String())
	ps := []Position{{2, 1}, {1, 9}, {2, 0}, {1, 10}}
	slices.SortFunc(ps, Compare)
	require.Equal(t, []Position{{1, 9}, {1, 10}, {2, 0}, {2, 1}}, ps)
}

func TestOutcomeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want Outcome
	}{
		{nil, Acked},
		{&queueclient.Error{Status: 410, Code: "already_settled"}, AckSettled},
		{&queueclient.Error{Status: 410, Code: "gone"}, AckLate},
		{&queueclient.Error{Status: 503}, AckRefused},
		{&queueclient.Error{Status: 502}, AckUnsure},
		{errors.New("connection refused"), AckUnsure},
	} {
		o, err := OutcomeOf(tc.err)
		require.NoError(t, err, tc.err)
		require.Equal(t, tc.want, o, tc.err)
	}
	o, err := OutcomeOf(&queueclient.Error{Status: 400, Code: "bad_request", Text: "no topic"})
	require.Equal(t, Held, o)
	require.ErrorContains(t, err, "ack: 400 bad_request: no topic")
}

func TestRecords(t *testing.T) {
	type rec struct{ n int }
	rs := Records[rec]{}
	require.False(t, rs.Any(func(r *rec) bool { return true }), "none")
	rs.At(Position{1, 2}).n = 5
	require.Equal(t, 5, rs.At(Position{1, 2}).n, "the same record")
	require.Len(t, rs, 1)
	require.True(t, rs.Any(func(r *rec) bool { return r.n == 5 }))
	require.False(t, rs.Any(func(r *rec) bool { return r.n == 4 }))
}
