// Package partitionmap is a table of values by partition number for tables read on every
// call: hosts number partitions from zero, so those below a limit are indexed in a slice and
// only others are hashed. A lookup is then a bounds check and an index.
//
// A Map is not safe for concurrent change; its users keep each one unchanged once
// published and change a Clone.
package partitionmap
