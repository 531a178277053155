package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"narad.dev/consume/router"
)

// The cluster mode (see the package documentation, "Cluster mode"): the file every node
// reads, who owns what, and how the nodes authenticate each other.

// Bounds of the peers' own calls (the node wire's calls have the node's budgets).
const (
	// peerBudget bounds one call to a peer's endpoint (a forwarded send, a catalogue
	// write); the client's request bounds it too.
	peerBudget = 5 * time.Second
	// maxPeerRequest bounds a request's body at a peer endpoint: a forwarded message (at most
	// 1 MiB of body and attributes, base64 in JSON) or a catalogue write.
	maxPeerRequest = 4 << 20
	// maxPeerReply bounds a reply a node reads from a peer: the catalogue, whole.
	maxPeerReply = 64 << 20
	// minSecret is the shortest secret a cluster file may hold, in bytes.
	minSecret = 16
)

// errBadClusterFile marks a -cluster file that cannot be used: the server does not start.
var errBadClusterFile = errors.New("sqsd: bad cluster file")

// clusterFile is the -cluster file: every node of the cluster reads the same one.
type clusterFile struct {
	// Secret is shared by the nodes: they authenticate each other with a token derived
	// from it, and the receipt handles' key is derived from it (a handle is valid on every
	// node). At least 16 bytes; 32 random ones, say, in hex.
	Secret string `json:"secret"`
	// Nodes are the cluster's nodes, in an order every node's file keeps: partition p of
	// every queue is owned by Nodes[p mod len(Nodes)], and the first is the home of the
	// queue catalogue.
	Nodes []clusterNode `json:"nodes"`
}

// clusterNode is one node of the cluster file.
type clusterNode struct {
	ID string `json:"id"`
	// Peer is the address (host:port) the node listens on for its peers, and they reach it
	// at: the node wire and the peer endpoints, apart from the SQS listener (-addr).
	Peer string `json:"peer"`
}

// readClusterFile reads the cluster file at path, and the index of node self in it.
func readClusterFile(path, self string) (clusterFile, int, error) {
	var cf clusterFile
	data, err := os.ReadFile(path)
	if err != nil {
		return cf, 0, fmt.Errorf("%w: %v", errBadClusterFile, err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cf); err != nil {
		return cf, 0, fmt.Errorf("%w: %s: %v", errBadClusterFile, path, err)
	}
	bad := func(format string, args ...any) (clusterFile, int, error) {
		return cf, 0, fmt.Errorf("%w: %s: %s", errBadClusterFile, path, fmt.Sprintf(format, args...))
	}
	if len(cf.Secret) < minSecret {
		return bad("the secret has %d bytes, fewer than %d", len(cf.Secret), minSecret)
	}
	if len(cf.Nodes) == 0 {
		return bad("no nodes")
	}
	at := -1
	for i, n := range cf.Nodes {
		if n.ID == "" || strings.ContainsAny(n.ID, "/ \t\r\n") {
			return bad("node %d has an ID that is empty or holds a slash or a space", i)
		}
		if _, _, err := net.SplitHostPort(n.Peer); err != nil {
			return bad("node %q: peer %q is no host:port", n.ID, n.Peer)
		}
		if slices.ContainsFunc(cf.Nodes[:i], func(o clusterNode) bool { return o.ID == n.ID }) {
			return bad("node %q is listed twice", n.ID)
		}
		if n.ID == self {
			at = i
		}
	}
	if at < 0 {
		return bad("no node %q (-node)", self)
	}
	return cf, at, nil
}

// deriveKey is a key of the cluster's, for purpose, from its secret: no key derived for one
// purpose tells another, or the secret.
func deriveKey(secret, purpose string) []byte {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("sqsd cluster " + purpose))
	return m.Sum(nil)
}

// nodeList is the cluster's nodes, in order, as the peer token binds them: nodes whose files
// list others, or in another order (who would disagree about ownership), refuse each other
// as they would a peer without the secret.
func nodeList(nodes []clusterNode) string {
	var b strings.Builder
	for _, n := range nodes {
		fmt.Fprintf(&b, "%q=%q;", n.ID, n.Peer)
	}
	return b.String()
}

// A cluster is this node's view of the cluster file: who owns which partition, and how to
// reach and authenticate the peers.
type cluster struct {
	nodes []clusterNode
	self  int
	// bearer is the Authorization header every peer request carries, and every peer
	// endpoint checks (in constant time): derived from the secret and the list of nodes.
	bearer     string
	receiptKey []byte
	client     *http.Client      // the peer endpoints (the node wire has its own transport)
	wireURLs   map[string]string // node ID → its node wire's URL, resolved on every call

	routeSets sync.Map // partitions of a topic → *routeSet
}

func newCluster(cf clusterFile, self int) *cluster {
	c := &cluster{
		nodes:      cf.Nodes,
		self:       self,
		bearer:     "Bearer " + hex.EncodeToString(deriveKey(cf.Secret, "peer token "+nodeList(cf.Nodes))),
		receiptKey: deriveKey(cf.Secret, "receipt key"),
		client: &http.Client{Transport: &http.Transport{
			Proxy:               nil, // peers are called directly, whatever HTTP_PROXY says
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     90 * time.Second,
		}},
		wireURLs: map[string]string{},
	}
	for i, n := range cf.Nodes {
		c.wireURLs[n.ID] = c.peerURL(i, "/node")
	}
	return c
}

// selfID is this node's ID.
func (c *cluster) selfID() string { return c.nodes[c.self].ID }

// isHome reports whether this node keeps the queue catalogue (the file's first node).
func (c *cluster) isHome() bool { return c.self == 0 }

// owner returns the index of the node that owns partition p of every queue.
func (c *cluster) owner(p int32) int { return int(p) % len(c.nodes) }

// nodeIndex returns the index of the node named id.
func (c *cluster) nodeIndex(id string) (int, bool) {
	i := slices.IndexFunc(c.nodes, func(n clusterNode) bool { return n.ID == id })
	return i, i >= 0
}

// peerURL is the URL of path at node i's peer listener.
func (c *cluster) peerURL(i int, path string) string {
	return "http://" + c.nodes[i].Peer + path
}

// A routeSet is the routes of every topic of one partition count: ownership depends on the
// partition's number alone, so one set serves every queue with as many partitions (and the
// node sees the same slices at every call).
type routeSet struct {
	local  []int32
	remote map[string][]int32
}

// routes returns the routes of a topic of partitions partitions.
func (c *cluster) routes(partitions int) *routeSet {
	if rs, ok := c.routeSets.Load(partitions); ok {
		return rs.(*routeSet)
	}
	rs := &routeSet{remote: map[string][]int32{}}
	for p := range int32(partitions) {
		if o := c.owner(p); o == c.self {
			rs.local = append(rs.local, p)
		} else {
			rs.remote[c.nodes[o].ID] = append(rs.remote[c.nodes[o].ID], p)
		}
	}
	got, _ := c.routeSets.LoadOrStore(partitions, rs)
	return got.(*routeSet)
}

// authorized reports whether r carries the cluster's token, compared in constant time.
func (c *cluster) authorized(r *http.Request) bool {
	return subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), []byte(c.bearer)) == 1
}

// errPeerRefused: a peer request without the cluster's token (the node wire's Authorize).
var errPeerRefused = errors.New("sqsd: a peer request without the cluster's token")

// authorizeNode is the node wire handler's Authorize: the cluster's token, and a node the
// file names.
func (c *cluster) authorizeNode(r *http.Request, from string) error {
	if !c.authorized(r) {
		return errPeerRefused
	}
	if _, ok := c.nodeIndex(from); !ok {
		return fmt.Errorf("sqsd: %q is no node of the cluster", from)
	}
	return nil
}

// requireToken wraps a peer endpoint: a request without the cluster's token is refused
// (403) before anything reads it.
func (c *cluster) requireToken(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !c.authorized(r) {
			http.Error(w, errPeerRefused.Error(), http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// A peerStatusError is a peer endpoint's refusal: its status and the start of its text.
type peerStatusError struct {
	Node string
	Code int
	Text string
}

func (e *peerStatusError) Error() string {
	return fmt.Sprintf("sqsd: peer %s answered %d %s: %s", e.Node, e.Code, http.StatusText(e.Code), e.Text)
}

// Unwrap: a peer that could not serve now (503) is unavailable, which the SDKs retry.
func (e *peerStatusError) Unwrap() error {
	if e.Code == http.StatusServiceUnavailable {
		return router.ErrUnavailable
	}
	return nil
}

// call sends in (JSON; nil: a GET) to path at node i's peer listener, within peerBudget, and
// decodes its 200 answer into out. A peer that could not be reached, or whose answer did not
// come back whole, is router.ErrUnavailable; a refusal is a *peerStatusError.
func (c *cluster) call(ctx context.Context, i int, path string, in, out any) error {
	ctx, cancel := context.WithTimeout(ctx, peerBudget)
	defer cancel()
	method, body := http.MethodGet, io.Reader(nil)
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		method, body = http.MethodPost, bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.peerURL(i, path), body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", c.bearer)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: peer %s: %v", router.ErrUnavailable, c.nodes[i].ID, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxPeerReply+1))
	switch {
	case err != nil:
		return fmt.Errorf("%w: peer %s: reading the answer: %v", router.ErrUnavailable, c.nodes[i].ID, err)
	case len(data) > maxPeerReply:
		return fmt.Errorf("%w: peer %s: an answer over %d bytes", errBadPeerAnswer, c.nodes[i].ID, maxPeerReply)
	case resp.StatusCode != http.StatusOK:
		return &peerStatusError{Node: c.nodes[i].ID, Code: resp.StatusCode, Text: strings.TrimSpace(string(data[:min(len(data), 512)]))}
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%w: peer %s: %v", errBadPeerAnswer, c.nodes[i].ID, err)
	}
	return nil
}

// errBadPeerAnswer: a peer's answer that is not what its endpoint answers.
var errBadPeerAnswer = errors.New("sqsd: a peer's answer is malformed")

// readPeerRequest decodes a peer endpoint's JSON request into in, answering 400 (or 413)
// and false when it is not one.
func readPeerRequest(w http.ResponseWriter, r *http.Request, in any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxPeerRequest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(in); err != nil {
		if _, over := errors.AsType[*http.MaxBytesError](err); over {
			http.Error(w, "sqsd: a peer request over the bound", http.StatusRequestEntityTooLarge)
			return false
		}
		http.Error(w, "sqsd: a malformed peer request: "+err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

// writePeerAnswer answers v as JSON (200).
func writePeerAnswer(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(data)
}

// peerError answers err at a peer endpoint with the status its caller tells apart.
func peerError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	switch {
	case errors.Is(err, router.ErrUnknownTopic):
		code = http.StatusNotFound
	case errors.Is(err, router.ErrNotLocal), errors.Is(err, errCatalogConflict):
		code = http.StatusConflict
	case errors.Is(err, errBadPeerRequest):
		code = http.StatusBadRequest
	case router.HTTPStatus(err) == http.StatusServiceUnavailable:
		code = http.StatusServiceUnavailable
	}
	http.Error(w, err.Error(), code)
}

// errBadPeerRequest: a peer's request that is well-formed JSON but not a request the
// endpoint serves (a partition out of range, a queue name that is none).
var errBadPeerRequest = errors.New("sqsd: a bad peer request")
