package router

// The protocol's fixed timings and sizes, for the package's external tests, which check the
// behaviour they bound.
const (
	ProbeHedge        = probeHedge
	GatewayResend     = gatewayResend
	SlowOwnerRecheck  = slowOwnerRecheck
	UnassignedRecheck = unassignedRecheck
	RemoteBatch       = remoteBatch
	DrainedPasses     = drainedPasses
)

// SetDeposing runs f in the next deposes of a partition, once the shard was found the
// partition's current one and before it is dropped (nil: nothing), so that a test can play
// the callers that race there.
func SetDeposing(f func()) {
	if f == nil {
		deposing.Store(nil)
		return
	}
	deposing.Store(&f)
}
