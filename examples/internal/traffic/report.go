package traffic

import "fmt"

// ProducedNote says how the records counted as produced came to be: answered by their owner,
// and landed more whose produce got no answer but that were delivered all the same.
func ProducedNote(landed int) string {
	note := "answered by their owner"
	if landed > 0 {
		note += fmt.Sprintf(", and %d more whose produce got no answer but landed", landed)
	}
	return note
}

// AckedNote says which records were acked: every one, or all but lost of them; unsure of
// them by an ack whose answer was lost, counted because their partition drained.
func AckedNote(lost, unsure int) string {
	note := "every record"
	if lost > 0 {
		note = fmt.Sprintf("all but %d records", lost)
	}
	if unsure > 0 {
		note += fmt.Sprintf(" (%d by an ack whose answer was lost: their partition drained)", unsure)
	}
	return note
}
