package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"narad.dev/consume/router"
	"narad.dev/consume/router/nodehttp"
)

// The server's side of the cluster mode: its routes, its sends to other owners, and its
// peer listener.

// clusterRoutes are the node's Routes in cluster mode: partition p of a queue's live topic
// is the cluster file's node p mod N (cluster.routes); the topics of deleted lives are no
// one's.
type clusterRoutes struct{ s *server }

var (
	_ router.Routes      = clusterRoutes{}
	_ router.OwnerFinder = clusterRoutes{}
)

func (r clusterRoutes) Partitions(topic string) ([]int32, map[string][]int32, bool) {
	n, ok := r.s.cat.partitionsOf(topic)
	if !ok {
		if m := r.s.cat.mirror; m != nil && !r.s.cat.wasDropped(topic) {
			m.kick() // another node asks of a queue this one has not heard of yet
		}
		return nil, nil, false
	}
	rs := r.s.cluster.routes(n)
	return rs.local, rs.remote, true
}

// Owner implements router.OwnerFinder.
func (r clusterRoutes) Owner(topic string, p int32) (string, bool) {
	n, ok := r.s.cat.partitionsOf(topic)
	if !ok || p < 0 || int(p) >= n {
		return "", false
	}
	o := r.s.cluster.owner(p)
	if o == r.s.cluster.self {
		return "", false
	}
	return r.s.cluster.nodes[o].ID, true
}

// A produceRequest is a send forwarded to the owner of a partition: Partition -1 lets the
// owner choose one of its own (a standard queue's send).
type produceRequest struct {
	Topic     string        `json:"topic"`
	Partition int32         `json:"partition"`
	Record    router.Record `json:"record"`
}

// produceAnswer is where a forwarded send landed.
type produceAnswer struct {
	Partition int32 `json:"partition"`
	Offset    int64 `json:"offset"`
}

// forwardProduce sends rec to node o to append to partition p of topic (-1: one of its
// own).
func (s *server) forwardProduce(ctx context.Context, o int, topic string, p int32, rec router.Record) (int32, int64, error) {
	var ans produceAnswer
	err := s.cluster.call(ctx, o, "/sqsd/produce", produceRequest{Topic: topic, Partition: p, Record: rec}, &ans)
	if status, ok := errors.AsType[*peerStatusError](err); ok {
		switch status.Code {
		case http.StatusNotFound:
			return 0, 0, fmt.Errorf("%w: %s at %s", router.ErrUnknownTopic, topic, status.Node)
		case http.StatusConflict:
			// The owner disagrees about ownership: the cluster files differ. Retried, and
			// refused as long as they do.
			return 0, 0, fmt.Errorf("%w: %v", router.ErrUnavailable, err)
		}
	}
	if err != nil {
		return 0, 0, err
	}
	// Where the owner says the record landed becomes its MessageId: it must be the
	// partition asked for, or, for any, one the owner owns.
	if (p >= 0 && ans.Partition != p) || (p < 0 && (ans.Partition < 0 || s.cluster.owner(ans.Partition) != o)) || ans.Offset < 0 {
		return 0, 0, fmt.Errorf("%w: peer %s appended to partition %d at %d", errBadPeerAnswer, s.cluster.nodes[o].ID, ans.Partition, ans.Offset)
	}
	return ans.Partition, ans.Offset, nil
}

// produceAnywhere sends rec of topic (n partitions) to an owner of its partitions, this node
// owning none: the owners tried in turn from the next, round robin, while they are
// unavailable.
func (s *server) produceAnywhere(ctx context.Context, topic string, n int, rec router.Record) (int32, int64, error) {
	owners := min(n, len(s.cluster.nodes)) // partitions 0..owners-1 name each owner once
	first := int(s.next.Add(1) % uint32(owners))
	var err error
	for i := range owners {
		o := s.cluster.owner(int32((first + i) % owners))
		var p int32
		var off int64
		if p, off, err = s.forwardProduce(ctx, o, topic, -1, rec); err == nil {
			return p, off, nil
		}
		if !errors.Is(err, router.ErrUnavailable) || ctx.Err() != nil {
			return 0, 0, err
		}
	}
	return 0, 0, err
}

// serveProduce is the peer endpoint of forwarded sends: the record appended to a partition
// of this node's.
func (s *server) serveProduce(w http.ResponseWriter, r *http.Request) {
	var in produceRequest
	if !readPeerRequest(w, r, &in) {
		return
	}
	n, ok := s.cat.partitionsOf(in.Topic)
	if !ok && s.cat.mirror != nil && s.cat.mirror.refreshOnMiss() { // a queue created meanwhile
		n, ok = s.cat.partitionsOf(in.Topic)
	}
	if !ok {
		peerError(w, fmt.Errorf("%w: %q", router.ErrUnknownTopic, in.Topic))
		return
	}
	p := in.Partition
	switch {
	case p < -1 || int(p) >= n:
		peerError(w, fmt.Errorf("%w: partition %d of %d", errBadPeerRequest, p, n))
		return
	case p == -1:
		local := s.cluster.routes(n).local
		if len(local) == 0 {
			peerError(w, fmt.Errorf("%w: no partition of %q", router.ErrNotLocal, in.Topic))
			return
		}
		p = local[int(s.next.Add(1)%uint32(len(local)))]
	case s.cluster.owner(p) != s.cluster.self:
		peerError(w, fmt.Errorf("%w: partition %d of %q", router.ErrNotLocal, p, in.Topic))
		return
	}
	off, err := s.store.AppendRecord(in.Topic, p, in.Record)
	if err != nil {
		peerError(w, err)
		return
	}
	writePeerAnswer(w, produceAnswer{Partition: p, Offset: off})
}

// startTransport makes the node wire's transport, before the node (which takes it) is
// made; listenPeers opens the peer listener once the node is.
func (s *server) startTransport() error {
	c := s.cluster
	var err error
	s.transport, err = nodehttp.NewTransport(nodehttp.TransportConfig{
		Self: c.selfID(),
		Resolve: func(id string) (string, bool) {
			u, ok := c.wireURLs[id]
			return u, ok
		},
		Header: http.Header{"Authorization": {c.bearer}},
	})
	return err
}

// listenPeers serves the peer endpoints on this node's peer address, every one behind the
// cluster's token:
//
//	POST /node                  the node wire (nodehttp.Handler over router.Node.Serve)
//	POST /sqsd/produce          a send forwarded to an owner
//	GET  /sqsd/catalog          the catalogue (the home only)
//	POST /sqsd/catalog/put      a queue's write forwarded to the home
//	POST /sqsd/catalog/delete   a DeleteQueue forwarded to the home
//	POST /sqsd/catalog/changed  the home's word that the catalogue changed (the others)
func (s *server) listenPeers() error {
	c := s.cluster
	ln, err := net.Listen("tcp", c.nodes[c.self].Peer)
	if err != nil {
		return fmt.Errorf("sqsd: the peer listener: %w", err)
	}
	s.peerHandler = &nodehttp.Handler{Serve: s.node.Serve, Authorize: c.authorizeNode}
	mux := http.NewServeMux()
	mux.Handle("POST /node", s.peerHandler)
	mux.HandleFunc("POST /sqsd/produce", s.serveProduce)
	if s.home != nil {
		s.home.register(mux)
	}
	if m := s.cat.mirror; m != nil {
		mux.HandleFunc("POST /sqsd/catalog/changed", m.serveChanged)
	}
	s.peerSrv = &http.Server{Handler: c.requireToken(mux), ReadHeaderTimeout: 10 * time.Second}
	nodehttp.ConfigureServer(s.peerSrv)
	s.peerDone = make(chan struct{})
	go func() {
		defer close(s.peerDone)
		s.peerSrv.Serve(ln)
	}()
	s.logger.Info("sqsd: cluster mode", "node", c.selfID(), "peer", ln.Addr().String(), "nodes", len(c.nodes), "home", c.nodes[0].ID)
	return nil
}

// closePeers shuts the peer listener down, after the node closed (which answers the
// frames that come later with a refusal): the server, its framed connections, then the
// connections to the peers.
func (s *server) closePeers() error {
	var err error
	if s.peerSrv != nil {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownGrace)
		defer cancel()
		err = s.peerSrv.Shutdown(ctx)
		<-s.peerDone
		err = errors.Join(err, s.peerHandler.Close())
	}
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
	if s.cluster != nil {
		s.cluster.client.CloseIdleConnections()
	}
	return err
}
