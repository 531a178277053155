// Package budget is the context of a node-to-node call that only its deadline ends: the
// call's budget. A Set, one per lane (the node's calls to one owner), opens a Context per
// call and keeps the open ones in a heap by deadline under a single timer on the node's
// clock, so a call that returns in time, as almost all do, costs a heap push and a pop
// instead of a runtime timer set and stopped per call. A Context carries the values of the
// context it was opened with but not its cancellation: a call that left is answered as the
// owner answers it, whatever its caller does meanwhile.
package budget
