package router

import (
	"path/filepath"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

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
		if got := topicDir(topic); got != want {
			t.Errorf("topicDir(%q) = %q, want %q", topic, got, want)
		}
	}
	long := strings.Repeat("注", MaxTopicLength/3)
	if d := topicDir(long); len(d) > dirNameBudget || !strings.Contains(d, "~") {
		t.Errorf("a long name is cut and hashed to at most %d bytes: %q", dirNameBudget, d)
	}
	rapid.Check(t, func(t *rapid.T) {
		gen := rapid.OneOf(rapid.StringN(1, -1, MaxTopicLength), rapid.StringMatching(`[a-zA-Z.~%]{1,90}`))
		a, b := gen.Draw(t, "a"), gen.Draw(t, "b")
		if len(a) > MaxTopicLength || len(b) > MaxTopicLength {
			t.Skip("longer than a node accepts")
		}
		da := topicDir(a)
		if p := filepath.Join("/state", da, "0"); !strings.HasPrefix(p, "/state/") || filepath.Dir(filepath.Dir(p)) != "/state" {
			t.Fatalf("topic %q escapes the state directory: %s", a, p)
		}
		if len(da) > 255 || da == "." || da == ".." || strings.HasSuffix(da, ".") || da == LockName {
			t.Fatalf("topic %q maps to %q, which not every file system takes", a, da)
		}
		if a != b && strings.EqualFold(da, topicDir(b)) {
			t.Fatalf("topics %q and %q share directory %q where case is folded", a, b, da)
		}
	})
}

func TestCheckTopic(t *testing.T) {
	for _, tt := range []struct {
		topic string
		ok    bool
	}{
		{"", false},
		{"a", true},
		{strings.Repeat("x", MaxTopicLength), true},
		{strings.Repeat("x", MaxTopicLength+1), false},
		{strings.Repeat("x", 1<<16+1), false},
	} {
		if err := checkTopic(tt.topic); (err == nil) != tt.ok {
			t.Errorf("checkTopic(%d bytes) = %v", len(tt.topic), err)
		}
	}
}
