package statedir

import (
	"path/filepath"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// maxTopicLength is router.MaxTopicLength, the longest topic a node accepts, which the
// directory names were designed for.
const maxTopicLength = 249

// Every topic name gets a directory of its own inside Config.Dir that any file system takes:
// no climbing out, no "." or "..", at most 255 bytes, no trailing dot, no Windows device
// name, and no two topics sharing one even where case is folded (issue 11: a 256-byte name
// could never be consumed, and two names differing in case shared their state on macOS).
func TestTopicDir(t *testing.T) {
	for topic, want := range map[string]string{
		"orders":    "orders",
		"Orders":    "%4Frders",
		"a/b":       "a%2Fb",
		"..":        "%2E%2E",
		".":         "%2E",
		".hidden.":  "%2Ehidden%2E",
		"../../etc": "%2E.%2F..%2Fetc",
		"v1.2":      "v1.2",
		"con":       "%63on",
		"nul.txt":   "%6Eul.txt",
		"com1":      "%63om1",
		"console":   "console",
		"~":         "%7E",
		"注文":        "%E6%B3%A8%E6%96%87",
	} {
		if got := TopicDir(topic); got != want {
			t.Errorf("TopicDir(%q) = %q, want %q", topic, got, want)
		}
	}
	long := strings.Repeat("注", maxTopicLength/3)
	if d := TopicDir(long); len(d) > dirNameBudget || !strings.Contains(d, "~") {
		t.Errorf("a long name is cut and hashed to at most %d bytes: %q", dirNameBudget, d)
	}
	rapid.Check(t, func(t *rapid.T) {
		gen := rapid.OneOf(rapid.StringN(1, -1, maxTopicLength), rapid.StringMatching(`[a-zA-Z.~%]{1,90}`))
		a, b := gen.Draw(t, "a"), gen.Draw(t, "b")
		if len(a) > maxTopicLength || len(b) > maxTopicLength {
			t.Skip("longer than a node accepts")
		}
		da := TopicDir(a)
		if p := filepath.Join("/state", da, "0"); !strings.HasPrefix(p, "/state/") || filepath.Dir(filepath.Dir(p)) != "/state" {
			t.Fatalf("topic %q escapes the state directory: %s", a, p)
		}
		if len(da) > 255 || da == "." || da == ".." || strings.HasSuffix(da, ".") || da == LockName {
			t.Fatalf("topic %q maps to %q, which not every file system takes", a, da)
		}
		if a != b && strings.EqualFold(da, TopicDir(b)) {
			t.Fatalf("topics %q and %q share directory %q where case is folded", a, b, da)
		}
	})
}

// Issue 26 (the state tool): a directory name gives back its topic, whether the name is this
// release's or an earlier one's, and no name gives a topic whose directory it is not.
func TestTopicOfDir(t *testing.T) {
	for _, tt := range []struct {
		name, topic string
		legacy, ok  bool
	}{
		{"orders", "orders", false, true},
		{"%4Frders", "Orders", false, true},
		{"Orders", "Orders", true, true},
		{"a%2Fb", "a/b", false, true},
		{"%2E", ".", false, true},
		{"%2E%", ".", true, true},
		{"%2E%2E%", "..", true, true},
		{"%63on", "con", false, true},
		{"%E6%B3%A8%E6%96%87", "注文", false, true},
		{"~", "~", true, true}, // url.PathEscape leaves '~' alone
		{"%", "", false, false},
		{LockName, "", false, false},
		{"a%2fb", "", false, false}, // topicDir writes uppercase escapes; PathEscape too
		{"%6Frders", "", false, false},
		{"abc%", "", false, false},
		{TopicDir(strings.Repeat("x", 300)), "", false, false},
		{"", "", false, false},
		// A legacy name is never cut: it gives back a topic longer than a node accepts,
		// which router.TopicOfDir then refuses.
		{strings.Repeat("x", 300), strings.Repeat("x", 300), true, true},
	} {
		topic, legacy, ok := TopicOfDir(tt.name)
		if topic != tt.topic || legacy != tt.legacy || ok != tt.ok {
			t.Errorf("TopicOfDir(%q) = %q, %v, %v; want %q, %v, %v", tt.name, topic, legacy, ok, tt.topic, tt.legacy, tt.ok)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		topic := rapid.OneOf(rapid.StringN(1, -1, maxTopicLength), rapid.StringMatching(`[a-zA-Z.~%/]{1,90}`)).Draw(t, "topic")
		if name := TopicDir(topic); !hashedDir(name) {
			if got, legacy, ok := TopicOfDir(name); got != topic || legacy || !ok {
				t.Fatalf("TopicOfDir(TopicDir(%q)) = %q, %v, %v", topic, got, legacy, ok)
			}
		}
		if name := legacyTopicDir(topic); name != TopicDir(topic) && !hashedDir(name) {
			if got, legacy, ok := TopicOfDir(name); got != topic || !legacy || !ok {
				t.Fatalf("TopicOfDir(legacyTopicDir(%q)) = %q, %v, %v", topic, got, legacy, ok)
			}
		}
		name := rapid.StringMatching(`[a-zA-Z0-9.~%]{1,40}`).Draw(t, "name")
		if got, legacy, ok := TopicOfDir(name); ok {
			if want := map[bool]string{false: TopicDir(got), true: legacyTopicDir(got)}[legacy]; want != name {
				t.Fatalf("TopicOfDir(%q) = %q, %v, whose directory is %q", name, got, legacy, want)
			}
		}
	})
}
