// Package inflight is placeholder.
package inflight
