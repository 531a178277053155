// Package routertest holds what a host uses to test with the library: an in-memory log
// (MemLogs, MemLog), static partition routes (Routes) and a fake clock (Clock), all
// satisfying the seams of package router.
package routertest
