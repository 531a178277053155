package offsets_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines after every test of the package's test binary. A test
// binary has one TestMain, so this one covers the internal tests (package offsets) as well as
// the external ones.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
