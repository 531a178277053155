package metrics

// help holds the HELP line of each family drawn from router.Stats, keyed by the field's
// path in it: what it counts, and why one watches it. A field of Stats with no entry here
// fails TestEveryFamilyExplainsItself.
var help = map[string]string{
	"Consumes":               "Consume calls this node answered, served or not; the rate of consumer polls.",
	"EmptyConsumes":          "Consume calls that delivered nothing (the 204s); a high share of Consumes means consumers poll an empty topic and may wait longer per call.",
	"Delivered":              "Records delivered to consumers under a lease (replays are not counted); the consume throughput.",
	"Replayed":               "Records read by Replay, which leases nothing; reads beside the queue's consumption.",
	"Deposed":                "Partitions taken from this node while it served them: the routes named another owner, its ownership grant lapsed or changed, or the state store refused a save as fenced.",
	"SetAsides":              "Partitions set aside because their ack state could not be loaded; each one serves nothing until a retry loads it.",
	"SetAsideRecovered":      "Set-aside partitions whose state loaded on a later try and rejoined.",
	"SetAsideNow":            "Partitions set aside now (Node.Health lists them); alert on any above zero: they serve nothing.",
	"HostContractViolations": "Answers of the host's seams (logs, routes) the node refused as breaking their contract; above zero, the host has a bug to fix.",
	"HostPanics":             "Panics of the host's code the node recovered on its own goroutines; above zero, the host has a bug to fix.",

	"Shards.Delivered":      "Records the shards delivered to consumers (redeliveries included; a reservation once a consumer got it).",
	"Shards.Reserved":       "Reservations the shards granted to nodes reading ahead; not deliveries until a consumer gets them (Delivered counts them then).",
	"Shards.Unused":         "Reservations released uncounted: given back unused by the node that read ahead, or lapsed before any consumer got them.",
	"Shards.Acked":          "Acks that settled an offset; with Delivered, the share of deliveries that end well.",
	"Shards.Extended":       "Extends that re-armed a lease; consumers that need more than the visibility timeout.",
	"Shards.Nacked":         "Nacks that released a lease for redelivery; records consumers could not handle.",
	"Shards.GivenBack":      "Reservations given back unread (a closed log, a consumer that left as its record was handed over).",
	"Shards.Gone":           "Acks, extends, nacks and rejects answered 410 because their lease was no longer live (expired, superseded); consumers slower than their visibility timeout.",
	"Shards.AlreadySettled": "Acks, extends, nacks and rejects of an offset already settled (a repeated ack).",
	"Shards.Expired":        "Leases that ran out of their visibility timeout, so their records are delivered again; consumers that die or stall.",
	"Shards.CorruptSkipped": "Offsets skipped as permanently unreadable: the audit trail of records no consumer received.",
	"Shards.RetentionJumps": "Frontier jumps to the oldest retained offset: retention removed records before they were consumed.",
	"Shards.Quarantined":    "Records set aside after reaching their topic's MaxDeliveries, or rejected (poison records); each waits for a Requeue or a Discard.",
	"Shards.Rejected":       "Records rejected by their consumer (Node.Reject) and quarantined at once, counted in Quarantined too; records consumers know will never succeed.",
	"Shards.Requeued":       "Quarantined records brought back for delivery by Requeue.",
	"Shards.Discarded":      "Quarantined records settled for good by Discard (copied to a dead-letter queue, say).",
	"Shards.AckedAheadStalls": "Times a partition reached its acked-ahead cap and served only its oldest unsettled record until it settled; " +
		"a hole (a stuck or abandoned lease) outlived what the state slot holds.",
	"Shards.Deferred":  "Records of ordered topics read and deferred behind their key (held by another consumer, or waiting for an earlier record's redelivery); each is delivered once its key frees.",
	"Shards.Postponed": "Records read for delivery that the host said were due later (Config.NotBefore: a delayed message); each waits out its time, no attempt spent.",
	"Shards.DeferredStalls": "Times an ordered partition held its MaxDeferred records deferred behind their keys and handed out no new record until keys freed; " +
		"a key held too long (a hung consumer) with many records behind it.",
	"Shards.Spilled":  "Records of ordered topics spilled past their key's MaxDeferredPerKey (a hot or hung key): left in the acked-ahead runs unindexed, read again once the key's records in memory run low.",
	"Shards.Refilled": "Spilled records of ordered topics brought back into memory, deferred behind their key, in order.",

	"Committer.Ticks":               "Ticks of the ack-state committer (its final pass at close included).",
	"Committer.Primes":              "Partitions whose state files the committer primed.",
	"Committer.BlankPrimes":         "Primes of partitions whose directory held no state yet.",
	"Committer.Windows":             "Window records of ack state written into the page cache.",
	"Committer.Writeouts":           "Successful writeouts of ack state (synced and flipped); what makes acks durable against power loss.",
	"Committer.Levels":              "consumer.offset files brought level with the durable state.",
	"Committer.WriteFailures":       "Failed window writes (the next tick writes the window again); above zero, the disk is failing.",
	"Committer.SyncFailures":        "Failed syncs of ack state (file, directory or device); above zero, acks are not being made durable.",
	"Committer.Evictions":           "Held descriptors closed to stay under the descriptor cap.",
	"Committer.OneShotWrites":       "Descriptors opened for one tick only because the cap was full.",
	"Committer.Reopens":             "Descriptors reopened after an eviction; steadily rising, the cap is too small for the partitions written.",
	"Committer.Stranded":            "Partitions stranded because their directory was removed or replaced under the node.",
	"Committer.DroppedAhead":        "Acked-ahead offsets left out of the state record for lack of room; a restart delivers them again.",
	"Committer.DroppedRequeued":     "Requeued offsets left out of the state record for lack of room.",
	"Committer.DroppedQuarantine":   "Quarantined offsets left out of the state record for lack of room.",
	"Committer.DroppedAttempts":     "Delivery-attempt counts left out of the state record for lack of room.",
	"Committer.Durables":            "Durable-ack waits (AckDurable, Persist) answered by a writeout.",
	"Committer.EarlyWriteouts":      "Writeouts made before their turn because a durable ack waited.",
	"Committer.Overruns":            "Committer ticks that took longer than the tick period; persisted offsets then lag acks.",
	"Committer.LateWriteouts":       "Ticks that found writes waiting more than twice the durability interval; a power loss would redeliver more acks than promised.",
	"Committer.Clamps":              "Recovered frontiers at or above the log's high watermark, clamped or dropped.",
	"Committer.IgnoredFiles":        "State files ignored as damaged or foreign at load; their partitions redeliver what the files held.",
	"Committer.SlowWriteouts":       "Writeout batches still running when the next tick came; durability lagged by their duration.",
	"Committer.WrittenToSpareSlots": "Window writes made while the partition's sync ran, into its spare slot: the page cache kept pace with acks while the disk was slow.",
	"Committer.SlowPrimes":          "Partitions whose first window waited more than one tick for its prime.",
	"Committer.DeferredWrites":      "Window writes put off to the next tick because no descriptor could be opened under the cap.",
	"Committer.Descriptors":         "consumer.ahead descriptors the committer holds open now.",
	"Committer.OpenDescriptors":     "Descriptors the committer has open now, of every kind; never above its cap.",
	"Committer.StrandedNow":         "Partitions stranded now (until the host drops them); above zero, state is not being written for them.",

	"Remote.Probes":        "Probes this node sent to other nodes owning a topic's partitions (a consume's first ask, and polls).",
	"Remote.ProbeHits":     "Probes answered with records.",
	"Remote.Registrations": "Delivery tokens this node left with owners for its parked consumers.",
	"Remote.Notifications": "Owners' notifications of a record taken for a consumer parked here.",
	"Remote.Claims":        "Claims sent to owners after a notification.",
	"Remote.ClaimHits":     "Claims answered with records; the rest went to another consumer.",
	"Remote.Passes":        "Notifications declined because nobody parked here could use them.",
	"Remote.Cancels":       "Cancels sent for a reply no consumer here received (its records go back).",
	"Remote.Hedges":        "Probes sent to a further owner while another's was still out past the probe hedge (50 ms); owners slow to answer.",
	"Remote.Unbacked":      "A peer's notifications and records refused because the routes give it no such partition; above zero, the routes disagree between nodes.",
	"Remote.SlowOwners":    "Owners found slow: a consume's RPC to them ran out of its budget.",
	"Remote.LateTaken":     "Probe replies with records that came after their consume parked, taken by it within the hold of their arrival.",
	"Remote.LateGivenBack": "Probe replies with records that came after their consume stopped waiting for them and went back to their owner (past the hold, a second owner's, or the consume gone); rising, owners answer slower than the probe hedge (50 ms).",
	"Remote.Served":        "Probes and claims of other nodes this node served as an owner.",
	"Remote.Tokens":        "Delivery tokens other nodes registered here.",
	"Remote.Notified":      "Notifications this node sent to other nodes (tokens fired).",
	"Remote.Passed":        "Of those notifications, passed: nobody there could use the record.",
	"Remote.Abandoned":     "Of those notifications, unanswered: the hold ended and the requester's token was dropped.",
	"Remote.Cancelled":     "Records given back because a cancel raced their reply.",

	"Ahead.Reserved":   "Records this node reserved at their owners ahead of its consumers (reading ahead); a reservation is not a delivery.",
	"Ahead.HandedOver": "Of the records read ahead, those handed to a consumer here, with no round trip of their own.",
	"Ahead.Unused":     "Of the records read ahead, those given back unused (they outstayed the hold, their lease was too short, or the node closed); their attempts do not count. Rising against HandedOver, the consumers' rate changes faster than the read-ahead follows.",
	"Ahead.HeldNow":    "Records this node holds reserved now, read ahead for no consumer yet (each goes back to its owner within the hold).",
	"Ahead.Refills":    "Consume RPCs that reserved records ahead of this node's consumers; Reserved over Refills is the records each carried.",
	"Ahead.Wait":       "How long the records read ahead waited here before a consumer took them (at most the hold, min(50 ms, a tenth of the visibility timeout)).",

	"ConsumeWait":     "How long the consumes that waited for a record took, from the call to its return, whether a record came or the wait ran out; consumes served at once are not in it.",
	"RemoteDelivery":  "How long the consumes served with another node's records took, from the call to the records' arrival (a probe's round trip, or a parked consume's wait and claim).",
	"ForwardedAckRPC": "Round trip of each RPC carrying forwarded acks, extends or nacks to their owner (one op or a batch), up to the end of its budget when no reply came; a slow or failing owner shows here.",
}

// The families of a topic's lag, labelled by topic (see Options.Topics).
const (
	topicAgeHelp             = "Age of the oldest unsettled record of the topic on this node's partitions, by its log timestamp against the node's clock (the greatest known; absent when none is known); alert when consumers stall."
	topicBacklogHelp         = "Records above the frontier of the topic's partitions on this node, leased, delayed or not yet delivered; the work left."
	topicUnknownHelp         = "Partitions of the topic on this node whose oldest unsettled record's age is not known (not loaded, a log without timestamps, a failed read); the age is a lower bound while above zero."
	topicBlockedHelp         = "Keys of an ordered topic on this node with records waiting behind a consumer that holds the key, a delay or a redelivery; a key blocked for long is a stuck consumer."
	topicDeferredHelp        = "Records of an ordered topic on this node read and waiting behind their keys (at most MaxDeferred a partition)."
	topicQuarantinedKeysHelp = "Keys of an ordered topic with QuarantineKeys on this node quarantined with a record of theirs: their later records follow it into the quarantine until it is requeued or discarded."
)
