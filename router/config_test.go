package router_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// New refuses settings out of range before it builds anything, naming the router.Config
// field at fault (not a field of a part the node is built of), as a 400.
func TestNewRefusesBadSettings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*router.Config)
		field string // named in the error; "" means the settings are accepted
	}{
		{"defaults", func(*router.Config) {}, ""},
		{"no Logs", func(c *router.Config) { c.Logs = nil }, "Config.Logs"},
		{"no Routes", func(c *router.Config) { c.Routes = nil }, "Config.Routes"},
		{"no Dir", func(c *router.Config) { c.Dir = "" }, "Config.Dir"},
		{"CommitInterval below 10ms", func(c *router.Config) { c.CommitInterval = 9 * time.Millisecond }, "Config.CommitInterval"},
		{"CommitInterval negative", func(c *router.Config) { c.CommitInterval = -time.Second }, "Config.CommitInterval"},
		{"CommitInterval above 60s", func(c *router.Config) { c.CommitInterval = time.Minute + 1 }, "Config.CommitInterval"},
		{"CommitInterval at 10ms", func(c *router.Config) { c.CommitInterval = router.MinCommitInterval }, ""},
		{"CommitInterval at 60s", func(c *router.Config) { c.CommitInterval = router.MaxCommitInterval }, ""},
		{"AckWindow negative", func(c *router.Config) { c.AckWindow = -1 }, "Config.AckWindow"},
		{"AckWindow one", func(c *router.Config) { c.AckWindow = 1 }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := crashfs.New()
			cfg := router.Config{Logs: &routertest.MemLogs{}, Routes: &routertest.Routes{}, Dir: "/state", FS: fsys}
			tc.edit(&cfg)
			node, err := router.New(cfg)
			if tc.field == "" {
				require.NoError(t, err)
				require.NoError(t, node.Close())
				return
			}
			require.ErrorIs(t, err, router.ErrInvalidArgument)
			assert.Contains(t, err.Error(), tc.field)
			assert.Equal(t, 400, router.HTTPStatus(err))
			_, statErr := fsys.Stat("/state")
			assert.Error(t, statErr, "refused before Dir was created")
		})
	}
}

// Every fault is named at once.
func TestNewNamesEveryBadSetting(t *testing.T) {
	_, err := router.New(router.Config{CommitInterval: time.Hour, AckWindow: -3})
	require.ErrorIs(t, err, router.ErrInvalidArgument)
	for _, field := range []string{"Config.Logs", "Config.Routes", "Config.Dir", "Config.CommitInterval", "Config.AckWindow"} {
		assert.Contains(t, err.Error(), field)
	}
}
