// Package httpapi is the client-facing HTTP consume API over a node: an http.Handler a
// broker mounts, serving consume (long-poll, batch, pinned, replay), ack, batch ack,
// extend, nack, release and reject as JSON over HTTP.
//
// # Mounting
//
//	node, err := router.New(router.Config{Logs: logs, Routes: routes, Dir: "/var/lib/app/consume"})
//	...
//	api, err := httpapi.New(node, httpapi.Options{
//		Identity: func(r *http.Request) string { return r.Header.Get("X-Api-Key") },
//	})
//	...
//	mux := http.NewServeMux()
//	mux.Handle("/queue/", http.StripPrefix("/queue", api))
//	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
//
// The handler serves the paths below relative to where it is mounted (strip the prefix, as
// above). A long-poll holds its request for up to its wait: a server with a WriteTimeout
// sets Options.MaxWait below it. The handler authenticates nobody; the host does, in front
// of it, and names the client through Options.Identity.
//
// # Routes
//
//	GET  /consume    ?topic= [&max=] [&wait=] [&visibility=] [&partition=]   queue consume
//	GET  /consume    ?topic= &partition= &offset= [&max=]                    replay
//	POST /ack        topic=, receipt_handle=
//	POST /extend     topic=, receipt_handle= [, visibility=]
//	POST /nack       topic=, receipt_handle= [, delay=]
//	POST /release    topic=, receipt_handle=
//	POST /reject     topic=, receipt_handle=
//	POST /ack-batch  [?topic=], JSON body {"topic"?: "...", "receipt_handles": ["...", ...]}
//
// The settles (ack, extend, nack, release, reject) take their parameters from the query string,
// from a URL-encoded form body (Content-Type application/x-www-form-urlencoded, or none), or
// from both; a parameter may appear once in all. The batch ack takes its topic from the
// query or the body (both must then agree) and its handles from the JSON body
// (Content-Type application/json, or none), whose keys are spelt exactly and appear once
// (encoding/json alone would take "Receipt_Handles" too, and the last of a repeated key: a
// body two readers could read two ways is a 400). Any other method on a route is a 405 with
// Allow; any other path a 404.
//
// Parameters:
//
//   - topic: required; 1 to router.MaxTopicLength bytes of UTF-8.
//   - max: 1 to router.MaxBatch; 1 when absent. For a queue consume, the batch size; for
//     a replay, the most records read.
//   - wait: how long a queue consume waits for a record when none is there (a long-poll),
//     0 to Options.MaxWait (router.MaxWait by default); 0 when absent. A Go duration
//     ("20s", "1.5s", "250ms") or a bare number of milliseconds ("1500").
//   - visibility: the lease's visibility timeout (consume) or the extension (extend), 0 to
//     router.MaxVisibility, in the same forms; absent or 0 means the topic's.
//   - delay: how long a nacked record stays invisible, 0 to router.MaxDelay, in the same
//     forms; 0 (visible again at once) when absent.
//   - partition: 0 to 2^31-1; pins a consume to the partition.
//   - offset: 0 to 2^63-1, with partition: a replay from offset, within retention, without
//     leases (no receipt handles, nothing counted as consumed). A replay takes no wait and
//     no visibility.
//   - receipt_handle: a message's receipt_handle, "partition:offset:nonce".
//
// A parameter given twice, one a route does not take, an empty value, a value with a sign, a
// number (max, partition, offset) with a fraction or an exponent, a duration with neither a
// unit nor the form of a whole number of milliseconds, and any value out of its range is a
// 400 naming the parameter;
// so is a query string over MaxQueryBytes or a body over MaxBodyBytes (read through an
// http.MaxBytesReader: never more), naming "query" or "body". Nothing malformed reaches the
// node. GET /consume reads no body.
//
// # Ordered topics
//
// A topic the host configures as ordered (router.TopicConfig.Ordered) needs nothing more
// here: a consume gets the consecutive records of a key it holds, in offset order, and no
// other consume gets records of that key until their leases end (see docs/protocol.md,
// "Ordered topics"). A record's key is its "key" field.
//
// # Responses
//
// A consume (or replay) with records is a 200 with
//
//	{"messages":[
//	  {"topic":"orders","partition":0,"offset":42,
//	   "key":"user-7","value":"{\"total\":12}",
//	   "timestamp":"2026-01-02T15:04:05.123456789Z",
//	   "headers":[{"key":"trace-id","value":"YWJj"}],
//	   "receipt_handle":"0:42:1311768467294899695","attempt":1,"reason":"first",
//	   "expiry":"2026-01-02T15:04:35.2Z","fence":"1767366245123456789"}
//	]}
//
// and one without is a 204, with no body (a long-poll whose wait ran out, say).
//
//   - key, value: a key or value that is valid UTF-8 is a JSON string; any other is
//     standard base64 with padding in key_base64 or value_base64 instead. An empty key is
//     left out; the value is always there. Either way the bytes come back exactly.
//   - headers: the record's headers (router.Message.Headers), in order, a key perhaps
//     repeated; left out when it has none. Each key is a JSON string (a key that is not
//     valid UTF-8 has each invalid byte replaced by U+FFFD, as encoding/json does), each
//     value standard base64 with padding, whatever its bytes. A record delivered through a
//     node of a release before wire version 9 comes without them (see router.Message).
//   - timestamp, expiry: RFC 3339 with nanoseconds, in UTC.
//   - attempt: 1 for a first delivery. reason: first, expired, nacked, restart or requeued.
//   - fence: the lease's fencing token (router.Message.Fence), a decimal string since it
//     passes 2^53.
//   - A replayed record carries no receipt_handle, attempt, reason, expiry or fence.
//
// Strings are escaped as encoding/json escapes them (<, > and & included). A response body
// is at most router.ResponseLimit (8 MiB), envelope included: the handler measures each
// message at its exact encoded size and cuts the batch with router.Node.FitResponse, which
// gives back the records past the bound before the response is written, so the next
// consume takes them at once. The first record is always delivered, whatever its size. A
// consume whose client left as its records came, or whose response could not be written,
// gives its records back too: released, or for a record of a partition another node owns,
// nacked there with no delay.
//
// An ack, nack, release or reject that took effect is a 204 with no body. An extend is a 200 with
// the lease's new expiry:
//
//	{"receipt_handle":"0:42:1311768467294899695","expiry":"2026-01-02T15:05:05Z"}
//
// A release of a record of a partition another node owns is forwarded to its owner, as every
// settle is (an owner on a release before the node wire's version 7 gets a nack with no delay
// instead, which counts as an attempt there).
//
// A reject settles a record as failed for good: it is quarantined at once, whatever its
// attempts and the topic's MaxDeliveries, as one that reached MaxDeliveries is (see
// router.Node.Reject: the node's Config.OnQuarantine is told, Requeue brings it back). Its
// handle is checked as an ack's is, with the same answers. A reject of a record whose owner
// runs a release before the node wire's version 10 is a 501 (unsupported) and changes
// nothing; so is every reject when the Node given to New has no Reject method (Rejecter).
//
// A batch ack is a 200 answering each handle, in order, with the status a single ack would
// have had, and the error and code of a failure:
//
//	{"results":[
//	  {"receipt_handle":"0:42:1311768467294899695","status":204},
//	  {"receipt_handle":"0:43:99","status":410,"error":"...","code":"gone"}
//	]}
//
// # Errors
//
// Every error is a JSON body {"error":"<message>","code":"<code>"}. A 400's message starts
// with the parameter at fault ("max: 1001 is outside [1, 1000]").
//
//	status  code               when
//	400     bad_request        a malformed or out-of-range parameter or body; a malformed
//	                           receipt handle
//	404     no_route           a path the handler does not serve
//	404     unknown_topic      a topic the node's routes do not know (or deleted while a
//	                           long-poll waited on it)
//	405     method_not_allowed another method than the route's (Allow names it)
//	410     gone               a receipt handle whose lease is gone: it lapsed, was nacked,
//	                           released or superseded, or was never issued
//	410     already_settled    a receipt handle of an offset already settled: a repeated
//	                           ack, which a client retrying a lost reply may take as success
//	429     too_many_requests  the client's identity has Options.MaxInFlight consume
//	                           requests in flight already; Retry-After says when to retry
//	502     owner_unreachable  the partition's owner sent no reply (router.ErrTransport)
//	501     unsupported        a reject the record's owner cannot apply (a release before
//	                           the node wire's version 10), or a Node without Reject
//	503     unavailable        try again: the node is closed or closing, the owner is down or
//	                           unknown (router.ErrUnavailable), the partition is not served
//	                           here or anywhere now, the log was closed under the read, or
//	                           the request's context ended
//	500     internal           anything else (a host error resolving a log, say)
//
// Statuses follow router.HTTPStatus, except that an unknown topic is a 404 rather than a
// 400.
//
// # Consume requests in flight
//
// Each client identity may have at most Options.MaxInFlight (DefaultMaxInFlight, 64)
// consume requests in flight at once, replays included; one more is answered 429 at once,
// with Retry-After (Options.RetryAfter, 1 s by default, in whole seconds). A long-poll
// counts for as long as it is held, including one held on a topic that no node serves yet.
// Settles are not bounded. The identity is what Options.Identity returns for the request;
// without it, the host part of the request's RemoteAddr (so behind a proxy that does not
// preserve client addresses, every client shares the proxy's bound). A request refused as
// malformed takes no slot.
//
// The request's context is the node call's: a client that disconnects ends its long-poll
// at once, and a record the node handed over at that instant is given back.
package httpapi
