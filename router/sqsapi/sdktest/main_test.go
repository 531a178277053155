package sdktest

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if serverBuild.dir != "" {
			os.RemoveAll(serverBuild.dir)
		}
		os.Exit(code)
	}))
}
