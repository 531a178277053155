package sqsapi

import (
	"errors"
	"net/http"
	"strconv"

	"narad.dev/consume/router"
)

// A code is one of SQS's error codes: the name the JSON protocol's __type carries (after
// "com.amazonaws.sqs#"), the query-protocol code of the x-amzn-query-error header (which the
// AWS SDKs report as the error's code), its HTTP status, and whose fault it is. The codes
// SQS models (QueueDoesNotExist, ReceiptHandleIsInvalid, ...) have the status and query code
// of SQS's own model; the common ones (InvalidParameterValue, MissingParameter, ...) those
// of SQS's list of common errors. A *code is an error, so that errors.Is(err, codeX) tells a
// failure's code.
type code struct {
	name   string
	query  string
	status int
	sender bool // the client's fault (Sender), or the service's (Receiver)
}

func (c *code) Error() string { return c.name }

// The codes the handler answers with.
var (
	// Modeled by SQS.
	codeQueueDoesNotExist        = &code{"QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", 400, true}
	codeReceiptHandleIsInvalid   = &code{"ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", 404, true}
	codeMessageNotInflight       = &code{"MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight", 400, true}
	codeInvalidAddress           = &code{"InvalidAddress", "InvalidAddress", 404, true}
	codeInvalidAttributeName     = &code{"InvalidAttributeName", "InvalidAttributeName", 400, true}
	codeInvalidAttributeValue    = &code{"InvalidAttributeValue", "InvalidAttributeValue", 400, true}
	codeQueueNameExists          = &code{"QueueNameExists", "QueueAlreadyExists", 400, true}
	codeQueueDeletedRecently     = &code{"QueueDeletedRecently", "AWS.SimpleQueueService.QueueDeletedRecently", 400, true}
	codePurgeQueueInProgress     = &code{"PurgeQueueInProgress", "AWS.SimpleQueueService.PurgeQueueInProgress", 403, true} // 403 in SQS's model, which the SDKs follow
	codeInvalidMessageContents   = &code{"InvalidMessageContents", "InvalidMessageContents", 400, true}
	codeUnsupportedOperation     = &code{"UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation", 400, true}
	codeEmptyBatchRequest        = &code{"EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest", 400, true}
	codeTooManyEntriesInBatch    = &code{"TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", 400, true}
	codeBatchEntryIdsNotDistinct = &code{"BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", 400, true}
	codeInvalidBatchEntryID      = &code{"InvalidBatchEntryId", "AWS.SimpleQueueService.InvalidBatchEntryId", 400, true}
	codeBatchRequestTooLong      = &code{"BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong", 400, true}
	codeRequestThrottled         = &code{"RequestThrottled", "RequestThrottled", 403, true}
	codeInvalidParameterValue    = &code{"InvalidParameterValue", "InvalidParameterValue", 400, true}
	codeMissingParameter         = &code{"MissingParameter", "MissingParameter", 400, true}
	codeMissingAction            = &code{"MissingAction", "MissingAction", 400, true}
	codeInvalidAction            = &code{"InvalidAction", "InvalidAction", 400, true}
	codeSerialization            = &code{"SerializationException", "SerializationException", 400, true}
	codeMalformedQueryString     = &code{"MalformedQueryString", "MalformedQueryString", 400, true}
	codeAccessDenied             = &code{"AccessDenied", "AccessDenied", 403, true}
	// SigV4's, as AWS's services answer them.
	codeMissingAuthenticationToken = &code{"MissingAuthenticationToken", "MissingAuthenticationToken", 403, true}
	codeIncompleteSignature        = &code{"IncompleteSignature", "IncompleteSignature", 400, true}
	codeInvalidClientTokenID       = &code{"InvalidClientTokenId", "InvalidClientTokenId", 403, true}
	codeSignatureDoesNotMatch      = &code{"SignatureDoesNotMatch", "SignatureDoesNotMatch", 403, true}
	codeMethodNotAllowed           = &code{"MethodNotAllowed", "MethodNotAllowed", 405, true}
	codeServiceUnavailable         = &code{"ServiceUnavailable", "ServiceUnavailable", 503, false}
	codeInternalFailure            = &code{"InternalFailure", "InternalFailure", 500, false}
)

// Causes a refused request's error wraps besides its code, for what the decoder refuses
// before any field is looked at.
var (
	// errTooLarge: the body is over MaxRequestBytes.
	errTooLarge = errors.New("sqsapi: request body too large")
	// errMalformed: the body is not one JSON object (a syntax error, data after it, or
	// another JSON value).
	errMalformed = errors.New("sqsapi: malformed JSON body")
	// errWrongType: a field holds a JSON value of another type than SQS's (a string for a
	// number, a fraction, a number out of int64, ...).
	errWrongType = errors.New("sqsapi: field of the wrong type")
)

// An apiError is a failure answered with an SQS error code: errors.Is matches its code and
// its cause.
type apiError struct {
	code  *code
	msg   string
	cause error
}

func (e *apiError) Error() string { return e.code.name + ": " + e.msg }

func (e *apiError) Is(target error) bool { return target == error(e.code) }

func (e *apiError) Unwrap() error { return e.cause }

func fail(c *code, msg string) error { return &apiError{code: c, msg: msg} }

// invalidValue is SQS's InvalidParameterValue, worded as SQS words it.
func invalidValue(param, value, reason string) error {
	return fail(codeInvalidParameterValue, "Value "+value+" for parameter "+param+" is invalid. Reason: "+reason)
}

func missing(param string) error {
	return fail(codeMissingParameter, "The request must contain the parameter "+param+".")
}

// codeOf is the code and message a failure is answered with: its own for an apiError, and
// for a node's error the code SQS has for it (an unknown topic is a queue that does not
// exist; a node or owner that cannot answer now is ServiceUnavailable, which the SDKs retry).
// Anything else is InternalFailure.
func codeOf(err error) (*code, string) {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae.code, ae.msg
	case errors.Is(err, router.ErrUnknownTopic):
		return codeQueueDoesNotExist, "The specified queue does not exist."
	case errors.Is(err, router.ErrMalformedHandle):
		return codeReceiptHandleIsInvalid, "The receipt handle is not valid."
	}
	switch router.HTTPStatus(err) {
	case http.StatusBadRequest:
		return codeInvalidParameterValue, err.Error()
	case http.StatusGone:
		return codeMessageNotInflight, "The message is not in flight: its receipt handle is stale."
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return codeServiceUnavailable, err.Error()
	}
	return codeInternalFailure, err.Error()
}

// writeError answers err as SQS's JSON protocol does: the status, the x-amzn-query-error
// header (code;Sender or code;Receiver) and a body {"__type":"com.amazonaws.sqs#Code",
// "message":"..."}.
func writeError(w http.ResponseWriter, c *code, msg string) {
	fault := ";Receiver"
	if c.sender {
		fault = ";Sender"
	}
	body := make([]byte, 0, 64+len(msg))
	body = append(body, `{"__type":"com.amazonaws.sqs#`...)
	body = append(body, c.name...)
	body = append(body, `","message":`...)
	body = appendJSONString(body, msg)
	body = append(body, '}')
	hdr := w.Header()
	hdr.Set("x-amzn-query-error", c.query+fault)
	hdr.Set("Content-Type", contentType)
	hdr.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(c.status)
	w.Write(body)
}
