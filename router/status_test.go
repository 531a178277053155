package router_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"narad.dev/consume/inflight"
	"narad.dev/consume/router"
)

func TestHTTPStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 204},
		{inflight.ErrAlreadySettled, 410},
		{inflight.ErrGone, 410},
		{fmt.Errorf("wrapped: %w", inflight.ErrMalformedHandle), 400},
		{router.ErrInvalidArgument, 400},
		{router.ErrUnknownTopic, 400},
		{router.ErrClosed, 503},
		{router.ErrLogClosed, 503},
		{router.ErrNotLocal, 503},
		{router.ErrTransport, 502},
		{context.Canceled, 503},
		{errors.New("host exploded"), 500},
	} {
		assert.Equal(t, tc.want, router.HTTPStatus(tc.err), "%v", tc.err)
	}
	assert.Equal(t, 204, router.ConsumeStatus(nil, nil))
	assert.Equal(t, 200, router.ConsumeStatus([]router.Message{{}}, nil))
	assert.Equal(t, 400, router.ConsumeStatus(nil, router.ErrUnknownTopic))
}
