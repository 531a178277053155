// Package nodehttp carries the node wire over HTTP: a router.Transport that sends the frames
// to each peer node over one connection, upgraded from HTTP/1.1 and multiplexed (by default,
// see "Framed connections"), or each as the body of one HTTP POST (TransportConfig.Unframed),
// and the http.Handler that hands the frames it receives to the local node's Serve, either
// way. Any host can use it as is; it needs nothing but the standard library.
//
// # Mounting the handler
//
// The host mounts a Handler on a server its peers reach, and lets that server accept HTTP/2
// cleartext (what the Transport speaks with Unframed, and to a peer that does not upgrade)
// with ConfigureServer; framed connections need nothing of the server but HTTP/1.1:
//
//	node, err := router.New(router.Config{..., Transport: transport})
//	handler := &nodehttp.Handler{Serve: node.Serve, Authorize: checkPeer}
//	mux.Handle("POST /consume/node", handler)
//	srv := &http.Server{Addr: ":7070", Handler: mux}
//	nodehttp.ConfigureServer(srv) // HTTP/2 cleartext besides HTTP/1.1
//	go srv.ListenAndServe()
//
// and at shutdown closes the handler after the server (see "Shutting down"):
//
//	node.Close()
//	srv.Shutdown(ctx)
//	handler.Close() // the framed connections, which Shutdown does not wait for
//	transport.CloseIdleConnections()
//
// The handler answers 200 with the reply frame, and refuses anything else before the node
// sees it: 400 without the caller's node header, 403 when Authorize refuses the caller, 405
// for a method other than POST, 413 for a body over the bound; a Serve error is a 500.
// router.Node.Serve takes the caller's name as given: a host whose network carries anyone
// but its own nodes authenticates them in Authorize (a client certificate in r.TLS, say,
// or a token its transports send in TransportConfig.Header, which rides every frame's
// request and every upgrade: cmd/sqsd's cluster mode sends one derived from its cluster's
// secret).
//
// # Building the transport
//
//	transport, err := nodehttp.NewTransport(nodehttp.TransportConfig{
//		Self:    "node-a", // this node's name, as the other nodes' Routes name it
//		Resolve: func(node string) (string, bool) { u, ok := peers[node]; return u, ok }, // "http://10.0.0.7:7070/consume/node"
//	})
//
// That is framed connections; add Unframed: true for one HTTP request per frame. Call
// resolves the node to the URL its handler is mounted at (an unknown node is
// ErrUnknownNode) and sends the frame there, over the peer's framed connection (opening it
// if there is none) or as a POST. It returns an error whenever no complete reply came back:
// a peer that is down (connection refused) fails at once, one that does not answer fails
// when the caller's context ends; a reset, a status other than 200 (a
// *StatusError), a reply cut short or over the bound are errors too, which the node answers
// as "no reply came back" (a 502 for a forwarded ack). A peer node's own refusal of a frame
// travels inside a 200 reply, as the node wire has it. Calls have no timeout of their own:
// the node gives each its budget through the context.
//
// # The header and the bounds
//
// Every request, and every upgrade to a framed connection, carries the calling node's name
// in the Header (Narad-Consume-From), path-escaped, so a name any Routes uses travels
// intact; the handler passes it to Serve as from, which is also the name an owner calls
// back (a notification). Frames, requests and replies alike, are at most MaxFrame (16 MiB,
// the node wire's own bound): the transport sends none longer and reads at most one byte
// past the bound of a reply, the handler likewise of a request (413).
//
// # HTTP/2 cleartext or HTTP/1.1
//
// With TransportConfig.Unframed, and to a peer that does not upgrade, the transport sends
// each frame as its own request, in HTTP/2 cleartext with prior knowledge (h2c, no upgrade):
// a few connections to each peer (DefaultH2MaxConnsPerHost) carry every call at once as
// streams, and an idle connection is checked with pings, so a peer that vanished without
// closing its connections is found and its connections replaced. TransportConfig.HTTP1
// speaks HTTP/1.1 with keep-alive instead, one connection per call in flight, pooled up to
// DefaultH1MaxConnsPerHost: for a path through a proxy or balancer that does not pass h2c
// through. A server set up with ConfigureServer accepts both. With
// TransportConfig.TLSClientConfig, https URLs work too (HTTP/2 or HTTP/1.1 over TLS).
//
// # Framed connections
//
// By default the transport keeps one connection to each peer and sends every frame over it,
// multiplexed, instead of one HTTP request per frame. It is the default because it is the
// cheapest way to the peers that is safe. Cheapest: on loopback an HTTP/2 round trip costs
// several times the CPU of a framed one (78 µs against 22 µs a call; see BENCHMARKS.md, "The
// node wire and its transports"), and a record consumed and acked through a gateway costs
// less CPU too. Safe: as safe as h2c, with one connection per peer carrying every call at
// once as HTTP/2 does, a cancel per call, pings that find a peer gone silent, a bound on
// every frame, and a fallback to plain HTTP when something between the nodes drops the
// upgrade (below).
//
// The transport opens the connection with an HTTP/1.1 POST to the peer's URL carrying the
// caller's node header and "Upgrade: narad-frames/1"; the Handler checks it as it checks a
// frame (the method, the header, Authorize, which sees the request and its r.TLS) and switches
// the connection (101 Switching Protocols). From then on each call travels behind a header of
// 13 bytes (length, kind, call id) and is answered by a reply or a refusal carrying its id, in
// any order; calls in flight at once share the connection, and what queues while a write is in
// progress leaves in the next one, one system call for many frames. A call whose context ends
// sends a cancel, which ends the call's context at the handler, as a reset stream does over
// HTTP/2. A connection with calls in flight from which nothing arrived for 15 s is pinged and
// closed if the ping brings nothing back within 15 s; an idle one closes after 90 s. A frame
// over MaxFrame, or anything that is not a frame of the connection (ErrMalformed), closes the
// connection and fails the calls on it; the next call dials again. https URLs upgrade over TLS
// (HTTP/1.1 negotiated). The same server and handler serve both ways at once: the handler
// needs nothing to accept framed connections, and a node chooses by its transport's config.
// TransportConfig.HTTP1 leaves framed connections as they are (they are an HTTP/1.1 upgrade
// either way): it chooses what the frames to a peer that does not upgrade go as.
//
// A peer whose handler answers the upgrade with a plain reply (a release before framed
// connections, or a proxy between the nodes that drops the Upgrade header) is called as
// with Unframed (HTTP/2 cleartext, or HTTP/1.1 with HTTP1) for two minutes, then asked
// again. A network whose proxies break upgraded connections in a way the fallback cannot see
// (passing the 101 on, then stalling or cutting what follows) sets Unframed.
// TransportConfig.Framed, from when framed connections were not the default, is deprecated
// and has no effect.
//
// # Shutting down
//
// Close the node first (its Close waits for the calls in progress and answers later frames
// with a refusal), then shut the server down (http.Server.Shutdown, which does not wait
// for upgraded connections), then close the Handler (Handler.Close ends its framed
// connections and waits for them), then call Transport.CloseIdleConnections to close the
// connections to the peers. Every host closes its Handler: its peers' transports open framed
// connections to it by default, and without Handler.Close those outlive the server's
// Shutdown (their goroutines, and the peers' calls on them, run on).
package nodehttp
