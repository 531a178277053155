// Package frontend holds what the node's client-facing HTTP front ends (router/httpapi, the
// consume API of its own; router/sqsapi, the SQS JSON protocol) share: JSON string escaping
// as encoding/json escapes, the bound on each client's consume requests in flight, and the
// rule that a record taken for a client that is gone is given back at once.
//
// It is internal so that neither front end exports these helpers: they are not API.
package frontend
