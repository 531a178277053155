package sqsapi

import "narad.dev/consume/router"

// ReceiptFor is the receipt handle a handler with key gives queue's delivery whose node
// handle text is handle.
func ReceiptFor(key []byte, queue, handle string) string {
	h, err := router.ParseHandle(handle)
	if err != nil {
		panic(err)
	}
	return string(newReceiptTagger(key).appendReceipt(nil, queue, h))
}
