// Package routertest holds what a host uses to test with the library: an in-memory log
// (MemLogs, MemLog), static partition routes (Routes) and a fake clock (Clock), all
// satisfying the seams of package router. TestLog checks a host's own log against the
// contract of router.Log, which docs/protocol.md at the root of the module sets out in "The
// host's log".
package routertest
