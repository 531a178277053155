//go:build !linux

package statedir

// syncTree makes everything below dir durable, one fsync per file and directory (no
// syncfs here).
func syncTree(dir string) error { return syncTreeByWalk(dir) }
