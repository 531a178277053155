package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
	"narad.dev/consume/router/httpapi"
)

// TestOrderedTopic: a topic the host configures as ordered (router.TopicConfig.Ordered) is
// consumed in key order through the handler as it is: a consume gets the consecutive records
// of a key, a second consume meanwhile gets only the other keys, and the key's next record
// comes once the first consume acks.
func TestOrderedTopic(t *testing.T) {
	e := newEnv(t, httpapi.Options{}, func(c *router.Config) {
		c.Topic = func(string) router.TopicConfig { return router.TopicConfig{Ordered: true} }
	})
	log := e.logs.Log("orders", 0)
	for _, k := range []string{"acct-1", "acct-1", "acct-2", "acct-1"} {
		log.Append([]byte(k), []byte("op"), time.Unix(1700000000, 0))
	}
	e.node.Appended("orders", 0, 4)
	first := messages(t, e.do(http.MethodGet, "/consume?topic=orders&max=2"))
	require.Len(t, first, 2)
	require.Equal(t, []int64{0, 1}, []int64{first[0].Offset, first[1].Offset})
	second := messages(t, e.do(http.MethodGet, "/consume?topic=orders&max=10"))
	require.Len(t, second, 1, "acct-1's offset 3 waits behind the first consume")
	require.Equal(t, "acct-2", string(second[0].key()))
	require.Equal(t, http.StatusNoContent, e.do(http.MethodGet, "/consume?topic=orders&max=10").Code)
	for _, m := range first {
		require.Equal(t, http.StatusNoContent, e.do(http.MethodPost, settle("/ack", m.ReceiptHandle)).Code)
	}
	third := messages(t, e.do(http.MethodGet, "/consume?topic=orders&max=10"))
	require.Len(t, third, 1)
	require.Equal(t, int64(3), third[0].Offset)
}
