package router

import (
	"strings"
	"testing"
)

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

// TopicOfDir gives back only topics a node accepts: a legacy name, never cut, could carry a
// longer one (the encoding itself is tested in internal/statedir).
func TestTopicOfDirRefusesTopicsNoNodeAccepts(t *testing.T) {
	for _, tt := range []struct {
		name, topic string
		legacy, ok  bool
	}{
		{"orders", "orders", false, true},
		{"Orders", "Orders", true, true},
		{strings.Repeat("x", MaxTopicLength), strings.Repeat("x", MaxTopicLength), true, true},
		{strings.Repeat("x", MaxTopicLength+1), "", false, false},
		{TopicDir(strings.Repeat("x", MaxTopicLength)), "", false, false}, // hashed
		{"", "", false, false},
		{LockName, "", false, false},
	} {
		topic, legacy, ok := TopicOfDir(tt.name)
		if topic != tt.topic || legacy != tt.legacy || ok != tt.ok {
			t.Errorf("TopicOfDir(%d bytes) = %q, %v, %v; want %q, %v, %v", len(tt.name), topic, legacy, ok, tt.topic, tt.legacy, tt.ok)
		}
	}
}
