package statedir

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/url"
	"strings"
)

// A topic's state lives in a directory of the state directory named after the topic. The name must be
// one a file system of any kind takes, and two topics must never share one, on Linux as on
// the case-insensitive file systems of macOS and Windows. TopicDir maps every topic name to
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
// The empty topic is refused before it gets here, and so are topics longer than a node
// accepts (router.MaxTopicLength), which TopicDir maps all the same.

// TopicDir is the name of the state directory's entry that holds a topic's state, one
// directory per partition inside it named by the partition's number (see PartitionPath). It
// does not check the name.
func TopicDir(topic string) string {
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

// TopicOfDir says whose state a directory of the state directory named name holds: the
// topic, and legacy true when name is the one a release before this one gave the topic's
// directory (see Dir.AdoptLegacyTopic). ok is false for a name no topic has, among them the
// empty name and the names of long topics, which end in a hash of the topic and do not give
// it back (a topic of an earlier release whose name ended so is taken for one of them). A
// legacy name, never cut, gives back a topic of any length: a caller that bounds topics'
// length refuses longer ones itself.
func TopicOfDir(name string) (topic string, legacy, ok bool) {
	if hashedDir(name) {
		return "", false, false
	}
	for _, escaped := range []string{name, strings.TrimSuffix(name, "%")} {
		t, err := url.PathUnescape(escaped)
		if err != nil || t == "" {
			continue
		}
		switch name {
		case TopicDir(t):
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

// hashedDir reports whether name has the shape TopicDir gives a long topic's directory: '~'
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
// A node moves such a directory to its TopicDir name at the topic's first touch.
func legacyTopicDir(topic string) string {
	name := url.PathEscape(topic)
	if strings.Trim(name, ".") == "" {
		name = strings.ReplaceAll(name, ".", "%2E") + "%"
	}
	return name
}
