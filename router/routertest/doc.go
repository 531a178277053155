// Package routertest holds what a host uses to test with the library: an in-memory log
// (MemLogs, MemLog), static partition routes (Routes) and a fake clock (Clock), all
// satisfying the seams of package router. TestLog checks a host's own log against the
// contract of router.Log, which docs/protocol.md at the root of the module sets out in "The
// host's log", and each failure names the rule it breaks. It checks:
//   - appends and reads: every record read back at its own offset, with its key, value and
//     timestamp as appended, in slices the caller owns;
//   - the watermarks, at every step: never negative, Oldest <= HighWatermark, neither
//     decreasing;
//   - retention (also past the high watermark), corrupt records (ErrCorrupt on every read)
//     and closing (ErrLogClosed and nothing else, the watermarks still answered);
//   - router.RangeReader, when the log offers it: every bound (max, maxBytes, the high
//     watermark) from every start offset, long ranges, dst, a failing first or later record;
//   - concurrent readers beside an appender and retention (run it under -race too);
//   - the host's router.Logs, when the harness hands it over (LogsHarness): Get of known and
//     unknown partitions, nil answers, router.ManyGetter;
//   - a model-based property test, and consumption end to end through a router.Node (acks,
//     nacks, expiries, a reject that stays quarantined, a graceful restart).
package routertest
