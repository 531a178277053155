package router

// The protocol's fixed timings and sizes, for the package's external tests, which check the
// behaviour they bound.
const (
	ProbeHedge        = probeHedge
	GatewayResend     = gatewayResend
	SlowOwnerRecheck  = slowOwnerRecheck
	UnassignedRecheck = unassignedRecheck
	RemoteBatch       = remoteBatch
)
