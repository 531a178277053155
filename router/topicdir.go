package router

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
)

// A topic's state lives in a directory of Config.Dir named after the topic. The name must be
// one a file system of any kind takes, and two topics must never share one, on Linux as on
// the case-insensitive file systems of macOS and Windows. topicDir maps every topic name to
// such a directory name:
//   - bytes other than lowercase letters, digits, '-', '_' and '.' are escaped as '%' and two
//     uppercase hexadecimal digits, uppercase letters included, so names that differ only in
//     case get different directories, and so do all others (the escaping decodes back, and
//     folding case changes only the escapes' digits, which decode the same);
//   - a '.' that begins or ends the name is escaped, so no directory is "." or ".." and none
//     ends in a dot (which Windows drops); a name whose first part is a device name of
//     Windows (con, nul, com1, ...) gets its first letter escaped;
//   - a name longer than dirNameBudget once escaped keeps its first bytes and ends in '~' and
//     the first 32 hexadecimal digits of the topic's SHA-256, so it fits in the 255 bytes a
//     directory name may have ('~' is always escaped otherwise, so such a name is told apart).
//
// The empty topic, and topics longer than MaxTopicLength, are refused before they get here.

// TopicDir is the name of the directory of Config.Dir that holds a topic's ack state, one
// directory per partition inside it named by the partition's number (see PartitionDir): for
// an operator's tool that finds a partition's files on a node that may not be running. It
// does not check the name (see MaxTopicLength).
func TopicDir(topic string) string { return topicDir(topic) }

// TopicOfDir says whose state a directory of Config.Dir named name holds: the topic, and
// legacy true when name is the one a release before this one gave the topic's directory (a
// node moves such a directory to TopicDir(topic) at the topic's first touch, unless that one
// exists, which it then reads instead). ok is false for a name no topic has, among them the
// names of long topics, which end in a hash of the topic and do not give it back (a topic
// of an earlier release whose name ended so is taken for one of them).
func TopicOfDir(name string) (topic string, legacy, ok bool) {
	if hashedDir(name) {
		return "", false, false
	}
	for _, escaped := range []string{name, strings.TrimSuffix(name, "%")} {
		t, err := url.PathUnescape(escaped)
		if err != nil || checkTopic(t) != nil {
			continue
		}
		switch name {
		case topicDir(t):
			return t, false, true
		case legacyTopicDir(t):
			return t, true, true
		}
	}
	return "", false, false
}

// dirNameBudget is the longest escaped name kept whole, and the most a hashed one takes.
const dirNameBudget = 200

const hashSuffix = 1 + 32 // "~" and 128 bits of the name's hash, in hexadecimal

func topicDir(topic string) string {
	var b strings.Builder
	b.Grow(len(topic))
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if plain(c) && !(c == '.' && (i == 0 || i == len(topic)-1)) && !(i == 0 && windowsDevice(topic)) {
			b.WriteByte(c)
			continue
		}
		fmt.Fprintf(&b, "%%%02X", c)
	}
	name := b.String()
	if len(name) <= dirNameBudget {
		return name
	}
	keep := dirNameBudget - hashSuffix
	for keep > 0 && (name[keep-1] == '%' || (keep > 1 && name[keep-2] == '%')) {
		keep-- // never cut an escape in two
	}
	sum := sha256.Sum256([]byte(topic))
	return name[:keep] + "~" + hex.EncodeToString(sum[:16])
}

// hashedDir reports whether name has the shape topicDir gives a long topic's directory: '~'
// (which it escapes everywhere else) and the hexadecimal digits of the topic's hash.
func hashedDir(name string) bool {
	i := len(name) - hashSuffix
	if i < 0 || name[i] != '~' {
		return false
	}
	_, err := hex.DecodeString(name[i+1:])
	return err == nil
}

func plain(c byte) bool {
	return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.'
}

// windowsDevice reports whether the name's part before its first dot is one of the device
// names Windows reserves in every directory, whatever the case and the extension.
func windowsDevice(name string) bool {
	base, _, _ := strings.Cut(strings.ToLower(name), ".")
	switch base {
	case "con", "prn", "aux", "nul":
		return true
	}
	return len(base) == 4 && (strings.HasPrefix(base, "com") || strings.HasPrefix(base, "lpt")) &&
		'0' <= base[3] && base[3] <= '9'
}

// legacyTopicDir is the directory name releases before this one used: the topic
// path-escaped, its dots escaped too when the name was "." or "..", "%" for the empty name.
// A node moves such a directory to its topicDir name at the topic's first touch.
func legacyTopicDir(topic string) string {
	name := url.PathEscape(topic)
	if strings.Trim(name, ".") == "" {
		name = strings.ReplaceAll(name, ".", "%2E") + "%"
	}
	return name
}

// checkTopic refuses a topic name no node accepts: empty, or longer than MaxTopicLength.
func checkTopic(topic string) error {
	if topic == "" || len(topic) > MaxTopicLength {
		return fmt.Errorf("%w: topic name of %d bytes (1 to %d)", ErrInvalidArgument, len(topic), MaxTopicLength)
	}
	return nil
}

// adoptLegacyTopicDir moves a topic's directory from the name an earlier release gave it to
// its topicDir name, at the topic's first touch, so an upgrade keeps the topic's ack state. A
// failed move is logged and the topic starts from its legacy state's absence: its records
// are delivered again, none skipped.
func (n *Node) adoptLegacyTopicDir(topic string) {
	legacy, current := legacyTopicDir(topic), topicDir(topic)
	if legacy == current || n.rename == nil {
		return
	}
	from, to := filepath.Join(n.dir, legacy), filepath.Join(n.dir, current)
	if n.stat(to) == nil || n.stat(from) != nil {
		return
	}
	if err := n.rename(from, to); err != nil && n.stat(to) != nil {
		n.logger.Error("consume: cannot move a topic's state directory to its new name; its records are delivered again",
			"topic", topic, "from", from, "to", to, "err", err)
	}
}

// removeTopicDir removes a deleted topic's state, under its name and under the name an
// earlier release gave it, so neither is read as the state of a topic created again.
func (n *Node) removeTopicDir(topic string) error {
	if n.store != nil {
		return n.store.Delete(topic)
	}
	err := n.removeAll(filepath.Join(n.dir, topicDir(topic)))
	if legacy := legacyTopicDir(topic); legacy != topicDir(topic) {
		err = errors.Join(err, n.removeAll(filepath.Join(n.dir, legacy)))
	}
	return err
}
