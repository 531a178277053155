//go:build !unix

package offsets

// softNoFile has no open-file limit to read on this platform; the cap is then MaxDescriptors.
func softNoFile() uint64 { return 0 }
