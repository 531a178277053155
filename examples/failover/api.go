package main

import (
	"context"
	"fmt"
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

// answerOutcomes are the outcomes of an ack's answers; Rejected is none (the call was wrong).
var answerOutcomes = [...]outcome{
	queueclient.Acked: acked, queueclient.Settled: ackSettled, queueclient.Late: ackLate,
	queueclient.Refused: ackRefused, queueclient.Unsure: ackUnsure, queueclient.Rejected: held,
}

// outcomeOf says how an ack answered err ended: see queueclient.AckAnswer.
func outcomeOf(err error) (outcome, error) {
	a := queueclient.AckAnswer(err)
	if a == queueclient.Rejected {
		return held, fmt.Errorf("ack: %w", err)
	}
	return answerOutcomes[a], nil
}
