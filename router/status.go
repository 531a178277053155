package router

import (
	"context"
	"errors"

	"narad.dev/consume/inflight"
	"narad.dev/consume/offsets"
)

// The HTTP statuses HTTPStatus answers, as net/http names them. Spelled out here so that a
// host that serves no HTTP does not link net/http (and crypto/tls) through this package.
const (
	statusOK                  = 200
	statusNoContent           = 204
	statusBadRequest          = 400
	statusGone                = 410
	statusInternalServerError = 500
	statusNotImplemented      = 501
	statusBadGateway          = 502
	statusServiceUnavailable  = 503
)

// HTTPStatus maps what a node call returned to the HTTP status the protocol answers with, for a
// host that serves the consume path over HTTP:
//
//   - 204: an ack, extend, nack or reject that took effect (a bare 204, no body); a consume that
//     found nothing (see ConsumeStatus, which answers 200 for a consume with records);
//   - 400: a request the node refuses as malformed: a bad receipt handle, a bad argument,
//     an unknown topic;
//   - 410: a receipt handle that is not the live lease's (inflight.ErrGone): its lease
//     lapsed, was nacked or superseded, it was forged, or it names an offset already
//     settled (inflight.ErrAlreadySettled, which matches ErrGone: a repeated ack);
//   - 503: try again: the node is closing, the log was closed under the read, the partition
//     is not served here, its owner is unavailable, a durable ack could not be made durable, or the request's context
//     ended first;
//   - 502: a forwarded ack whose owner sent no reply (ErrTransport);
//   - 501: a settle the owner of its partition runs a release too old to apply (a reject
//     to an owner before the node wire's version 10: ErrUnsupportedOp, not applied);
//   - 500: anything else (a host error resolving a log, say), and ErrHostContract whatever
//     it wraps.
func HTTPStatus(err error) int {
	switch {
	case err == nil:
		return statusNoContent
	case errors.Is(err, ErrHostContract): // whatever else it wraps: the host's fault
		return statusInternalServerError
	case errors.Is(err, inflight.ErrGone): // ErrAlreadySettled too
		return statusGone
	case errors.Is(err, ErrTransport):
		return statusBadGateway
	case errors.Is(err, ErrUnsupportedOp) && !errors.Is(err, ErrInvalidArgument):
		// A settle the owner's release cannot apply (a reject before version 10); a frame
		// refused as unknown is a bad request (ErrInvalidArgument), as ever.
		return statusNotImplemented
	case errors.Is(err, inflight.ErrMalformedHandle), errors.Is(err, ErrInvalidArgument), errors.Is(err, ErrUnknownTopic):
		return statusBadRequest
	case errors.Is(err, ErrClosed), errors.Is(err, ErrLogClosed), errors.Is(err, ErrNotLocal), errors.Is(err, ErrUnavailable),
		errors.Is(err, ErrMoved),
		errors.Is(err, offsets.ErrShardGone), errors.Is(err, offsets.ErrStranded), errors.Is(err, offsets.ErrClosed),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return statusServiceUnavailable
	}
	return statusInternalServerError
}

// ConsumeStatus is HTTPStatus for the result of Consume: 200 with records, 204 when it
// delivered nothing.
func ConsumeStatus(msgs []Message, err error) int {
	switch {
	case err != nil:
		return HTTPStatus(err)
	case len(msgs) == 0:
		return statusNoContent
	}
	return statusOK
}
