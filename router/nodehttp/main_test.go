package nodehttp_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test closes what it opened: its servers (which wait for their handlers) and its
// transports' idle connections, so no connection goroutine outlives the tests.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
