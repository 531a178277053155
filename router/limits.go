package router

// MaxTopicLength is the longest topic name, in bytes, that a node forwards: longer names are
// refused with ErrInvalidArgument before anything reaches the wire.
const MaxTopicLength = 249
