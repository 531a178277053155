package traffic

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNotes(t *testing.T) {
	require.Equal(t, "answered by their owner", ProducedNote(0))
	require.Equal(t, "answered by their owner, and 2 more whose produce got no answer but landed", ProducedNote(2))
	require.Equal(t, "every record", AckedNote(0, 0))
	require.Equal(t, "all but 3 records (1 by an ack whose answer was lost: their partition drained)", AckedNote(3, 1))
}
