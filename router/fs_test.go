package router_test

import (
	"narad.dev/consume/crashfs"
	"narad.dev/consume/router"
)

// The in-memory file system the tests run on offers the node's whole file-system contract.
var _ router.FS = (*crashfs.FS)(nil)

// And the directory lock, so two nodes over one in-memory disk are kept apart.
var _ router.DirLocker = (*crashfs.FS)(nil)
