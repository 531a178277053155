package routertest_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"narad.dev/consume/router/routertest"
)

// Owner agrees with the remote map Partitions returns, through any sequence of changes: a
// partition one other node owns answers that node, one no other node owns answers nothing,
// and one named by several answers one of them.
func TestRoutesOwnerAgreesWithPartitions(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var routes routertest.Routes
		topics := []string{"a", "b"}
		owners := []string{"n1", "n2", "n3"}
		check := func() {
			for _, topic := range topics {
				_, remote, _ := routes.Partitions(topic)
				for p := int32(0); p < 6; p++ {
					var named []string
					for owner, parts := range remote {
						if slices.Contains(parts, p) {
							named = append(named, owner)
						}
					}
					owner, ok := routes.Owner(topic, p)
					require.Equal(t, len(named) > 0, ok, "topic %s partition %d", topic, p)
					if ok {
						require.Contains(t, named, owner)
					}
				}
			}
		}
		t.Repeat(map[string]func(*rapid.T){
			"SetRemote": func(t *rapid.T) {
				parts := rapid.SliceOfN(rapid.Int32Range(0, 5), 0, 4).Draw(t, "partitions")
				routes.SetRemote(rapid.SampledFrom(topics).Draw(t, "topic"), rapid.SampledFrom(owners).Draw(t, "owner"), parts...)
				check()
			},
			"Set": func(t *rapid.T) {
				parts := rapid.SliceOfN(rapid.Int32Range(0, 5), 0, 4).Draw(t, "partitions")
				routes.Set(rapid.SampledFrom(topics).Draw(t, "topic"), parts...)
				check()
			},
			"Delete": func(t *rapid.T) {
				routes.Delete(rapid.SampledFrom(topics).Draw(t, "topic"))
				check()
			},
		})
	})
}
