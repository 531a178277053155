package main

import (
	"context"
	"net/http"

	"narad.dev/consume/examples/internal/queueclient"
)

// The clients' side of the nodes' HTTP, the consume API (router/httpapi, under /queue) and
// the example's produce and status endpoints, is queueclient's.
type (
	api     = queueclient.Client
	message = queueclient.Message
)

// newAPI returns the client of the topic's nodes over transport.
func newAPI(transport http.RoundTripper) *api {
	return &api{HTTP: &http.Client{Transport: transport}, Topic: topic}
}

// status asks node base for its status.
func (c *clusterRun) status(ctx context.Context, base string) (nodeStatus, error) {
	var st nodeStatus
	err := c.api.Status(ctx, base, &st)
	return st, err
}
