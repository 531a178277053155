package offsets

// ReadDir reads the state of a partition from its directory dir through fsys (nil: the real
// file system) as recovery does (see Recover), for a host that has no committer over it: the
// state directory of a node that is not running, read to fail its partitions over to another
// node. It never writes. A missing directory or files mean no state (State.Found false); a
// read error is an error. Unlike Load it draws no incarnation: State.Incarnation is 0 when
// consumer.id holds none that can be trusted.
func ReadDir(fsys FS, dir, topic string, partition int32) (State, error) {
	if fsys == nil {
		fsys = OS()
	}
	files, err := readStateFiles(fsys, dir)
	if err != nil {
		return State{Frontier: -1}, &PartitionError{Topic: topic, Partition: partition, Op: "read", Err: err}
	}
	st, _, err := recoverState(PartitionKey(topic, partition), files)
	if err != nil {
		return st, &PartitionError{Topic: topic, Partition: partition, Op: "read", Err: err}
	}
	return st, nil
}

// ClampState is the arithmetic of ClampToWatermark for a verified state, for a host that keeps
// the state elsewhere than in files: a frontier at or above hwm is clamped to hwm-1 and
// offsets at or above hwm leave every set, key tails from hwm up with them. It reports whether it changed anything; the result
// shares st's slices.
func ClampState(st State, hwm int64) (State, bool) {
	clamped, d := clampState(st, hwm)
	return clamped, clamped.Frontier != st.Frontier || d != (clampDrops{})
}
