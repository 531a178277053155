package router

import (
	"path/filepath"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// Bad topic names never lead outside Config.Dir, and no two topics share a directory.
func TestTopicDir(t *testing.T) {
	for topic, want := range map[string]string{
		"orders":    "orders",
		"a/b":       "a%2Fb",
		"..":        "%2E%2E%",
		".":         "%2E%",
		"":          "%",
		"../../etc": "..%2F..%2Fetc",
		"v1.2":      "v1.2",
	} {
		if got := topicDir(topic); got != want {
			t.Errorf("topicDir(%q) = %q, want %q", topic, got, want)
		}
	}
	rapid.Check(t, func(t *rapid.T) {
		a, b := rapid.String().Draw(t, "a"), rapid.String().Draw(t, "b")
		da := topicDir(a)
		if p := filepath.Join("/state", da, "0"); !strings.HasPrefix(p, "/state/") || filepath.Dir(filepath.Dir(p)) != "/state" {
			t.Fatalf("topic %q escapes the state directory: %s", a, p)
		}
		if a != b && da == topicDir(b) {
			t.Fatalf("topics %q and %q share directory %q", a, b, da)
		}
	})
}
