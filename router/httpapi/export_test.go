package httpapi

// The encoder, for the tests that check it against encoding/json.
var (
	AppendMessage = appendMessage
	MessageLen    = messageLen
)

// BodyLimit is what the entries of one response body may take.
const BodyLimit = bodyLimit
