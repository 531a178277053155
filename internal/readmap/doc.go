// Package readmap is a table by name that is read on every call without a lock and grows
// one key at a time: a node's topics, its lanes to owners. Reads are lock-free (a sync.Map,
// behind a small cache of the entries read lately), adds are serialised so that each key's
// value is made once, and adding a key costs the same however many there are.
package readmap
