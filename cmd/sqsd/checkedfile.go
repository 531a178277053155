package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
)

// The server's files of state (queues.json, movetasks.json) share one format: a header line
// of the file's magic and the CRC-32C of the rest in hex, then the JSON.

// encodeChecked writes v as indented JSON after a header line of magic and the CRC-32C of
// the JSON in hex.
func encodeChecked(magic string, v any) ([]byte, error) {
	body, err := json.MarshalIndent(v, "", "\t")
	if err != nil {
		return nil, err
	}
	body = append(body, '\n')
	out := fmt.Appendf(nil, "%s%08x\n", magic, crc32.Checksum(body, crcTable))
	return append(out, body...), nil
}

// decodeChecked reads into v what encodeChecked wrote with magic: a missing or malformed
// header, a checksum that does not match, or a JSON field v has not is an error.
func decodeChecked(magic string, data []byte, v any) error {
	line, body, ok := bytes.Cut(data, []byte("\n"))
	if !ok || !bytes.HasPrefix(line, []byte(magic)) {
		return errors.New("no header line")
	}
	sum, err := strconv.ParseUint(string(line[len(magic):]), 16, 32)
	if err != nil {
		return errors.New("malformed header line")
	}
	if got := crc32.Checksum(body, crcTable); got != uint32(sum) {
		return fmt.Errorf("checksum %08x, the header says %08x", got, sum)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
