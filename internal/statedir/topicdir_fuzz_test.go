package statedir

import (
	"strings"
	"testing"
)

// TopicOfDir parses names an operator's disk holds, so any name must be safe to give it, and
// what it answers must be the name's own topic: the directory TopicDir (or, for a legacy
// name, the earlier releases' encoding) gives that topic is the name itself. Going the other
// way, every topic's directory name gives the topic back, unless it is a long topic's,
// which ends in a hash.
func FuzzTopicOfDir(f *testing.F) {
	for _, seed := range []string{
		"orders", "%4Frders", "Orders", "a%2Fb", "%2E", "%2E%", "%2E%2E%", "%63on", "nul.txt",
		"%E6%B3%A8%E6%96%87", "~", "%", "", LockName, "a%2fb", "%6Frders", "abc%",
		TopicDir(strings.Repeat("x", 300)), strings.Repeat("x", 300), "%ZZ", "a/b", "..",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if topic, legacy, ok := TopicOfDir(name); ok {
			want := TopicDir(topic)
			if legacy {
				want = legacyTopicDir(topic)
			}
			if topic == "" || want != name {
				t.Fatalf("TopicOfDir(%q) = %q, legacy %v, whose directory is %q", name, topic, legacy, want)
			}
		} else if topic != "" || legacy {
			t.Fatalf("TopicOfDir(%q) = %q, %v, false", name, topic, legacy)
		}
		// The name read as a topic: its directory gives it back.
		if name == "" {
			return
		}
		dir := TopicDir(name)
		if hashedDir(dir) {
			return
		}
		if got, legacy, ok := TopicOfDir(dir); got != name || legacy || !ok {
			t.Fatalf("TopicOfDir(TopicDir(%q)) = %q, %v, %v", name, got, legacy, ok)
		}
	})
}
