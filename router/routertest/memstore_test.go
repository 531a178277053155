package routertest_test

import (
	"testing"

	"narad.dev/consume/router"
	"narad.dev/consume/router/routertest"
)

// The in-memory store passes the conformance suite it offers hosts.
func TestMemStoreConforms(t *testing.T) {
	routertest.TestStateStore(t, routertest.StoreHarness{
		New:    func(*testing.T) router.StateStore { return &routertest.MemStore{} },
		Reopen: func(_ *testing.T, s router.StateStore) router.StateStore { return s },
		Fences: true,
	})
}
