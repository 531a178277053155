package router_test

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/router"
)

func TestMetricsExport(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 0)
		defer h.close()
		h.produce(0, 2)
		require.NoError(t, h.ack(h.one()))
		h.one()

		rec := httptest.NewRecorder()
		h.node.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body := rec.Body.String()
		assert.Contains(t, rec.Header().Get("Content-Type"), "text/plain; version=0.0.4")
		for _, line := range []string{
			"# TYPE narad_consume_delivered_total counter\nnarad_consume_delivered_total 2\n",
			"narad_consume_shards_acked_total 1\n",
			"narad_consume_shards_corrupt_skipped_total 0\n",
			"narad_consume_empty_consumes_total 0\n",
			"# TYPE narad_consume_committer_descriptors gauge\n",
		} {
			assert.Contains(t, body, line)
		}
		for _, l := range strings.Split(strings.TrimSpace(body), "\n") {
			if !strings.HasPrefix(l, "#") {
				assert.Regexp(t, `^narad_consume_[a-z_]+ -?\d+$`, l)
			}
		}

		var st router.Stats
		require.NoError(t, json.Unmarshal([]byte(h.node.Expvar().String()), &st))
		assert.Equal(t, uint64(2), st.Delivered)
	})
}
