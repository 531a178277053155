package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"narad.dev/consume/router"
	"narad.dev/consume/router/sqsapi"
)

// TestMain runs the tests, or, in a process a test started with runAsServer set, the
// server itself (main, with the process's arguments): the crash tests kill it.
func TestMain(m *testing.M) {
	if os.Getenv(runAsServer) == "1" {
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// openTestCatalog opens dir's catalogue with hooks that note the topics created and
// dropped.
func openTestCatalog(t *testing.T, dir string) (*catalog, *[]string) {
	t.Helper()
	c, err := openCatalog(dir, 3)
	require.NoError(t, err)
	var events []string
	c.createTopic = func(topic string, partitions int) error {
		events = append(events, "create "+topic)
		return nil
	}
	c.dropTopic = func(topic string) error {
		events = append(events, "drop "+topic)
		return nil
	}
	return c, &events
}

func TestCatalogSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	c, events := openTestCatalog(t, dir)
	ctx := context.Background()
	put := func(name string, attrs map[string]string) sqsapi.QueueRecord {
		rec, err := c.PutQueue(ctx, name, func(rec sqsapi.QueueRecord, exists bool) (sqsapi.QueueRecord, error) {
			rec.Attributes = attrs
			return rec, nil
		})
		require.NoError(t, err)
		return rec
	}
	a := put("a", map[string]string{"VisibilityTimeout": "5"})
	b := put("b", nil)
	require.NotEqual(t, "a", a.Topic, "a queue's topic names its life")
	require.Equal(t, []string{"create " + a.Topic, "create " + b.Topic}, *events)
	require.NoError(t, c.PurgeQueue(ctx, "b", b))
	require.NoError(t, c.DeleteQueue(ctx, "a"))
	require.ErrorIs(t, c.DeleteQueue(ctx, "a"), sqsapi.ErrQueueNotFound)
	// A refused change stores nothing.
	_, err := c.PutQueue(ctx, "c", func(sqsapi.QueueRecord, bool) (sqsapi.QueueRecord, error) {
		return sqsapi.QueueRecord{}, errors.New("no")
	})
	require.Error(t, err)

	again, _ := openTestCatalog(t, dir)
	require.Equal(t, []string{"b"}, again.ListQueues(""))
	rec, ok := again.Queue("b")
	require.True(t, ok)
	require.NotEqual(t, b.Topic, rec.Topic, "a purge moves the queue to a new topic")
	require.ElementsMatch(t, []string{a.Topic, b.Topic}, again.dropped())
	require.Equal(t, map[string]int{rec.Topic: 3}, again.queues())
	require.True(t, again.live(rec.Topic))
	require.False(t, again.live(b.Topic))
	require.NoError(t, again.forgetDropped(again.dropped()))
	again, _ = openTestCatalog(t, dir)
	require.Empty(t, again.dropped())
}

// A damaged catalogue is an error at start, never a server without its queues.
func TestCatalogDamaged(t *testing.T) {
	dir := t.TempDir()
	c, _ := openTestCatalog(t, dir)
	_, err := c.PutQueue(context.Background(), "orders", func(rec sqsapi.QueueRecord, _ bool) (sqsapi.QueueRecord, error) { return rec, nil })
	require.NoError(t, err)
	path := filepath.Join(dir, catalogName)
	good, err := os.ReadFile(path)
	require.NoError(t, err)
	for name, data := range map[string][]byte{
		"bit flipped": func() []byte { d := append([]byte(nil), good...); d[len(d)-10] ^= 1; return d }(),
		"cut short":   good[:len(good)/2],
		"empty":       {},
		"no header":   good[len(catalogMagic)+9:],
	} {
		require.NoError(t, os.WriteFile(path, data, 0o600))
		_, err := openCatalog(dir, 1)
		require.ErrorIs(t, err, errCorruptCatalog, name)
	}
}

func TestParseCredentials(t *testing.T) {
	keys, err := parseCredentials([]byte("# c\n\nAK1 s1\n  AK2\ts2  \n"))
	require.NoError(t, err)
	require.Equal(t, map[string]string{"AK1": "s1", "AK2": "s2"}, keys)
	for _, bad := range []string{"", "# only\n", "AK1\n", "AK1 s1 x\n", "AK1 s1\nAK1 s2\n"} {
		_, err := parseCredentials([]byte(bad))
		require.Error(t, err, "%q", bad)
	}
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags(nil, os.Stderr)
	require.NoError(t, err)
	require.Equal(t, "data", cfg.dir)
	require.True(t, cfg.fsync)
	require.Equal(t, router.DefaultReadAhead, cfg.readAhead)
	cfg, err = parseFlags([]string{"-read-ahead", "0"}, os.Stderr)
	require.NoError(t, err)
	require.Equal(t, router.ReadAheadOff, cfg.readAhead, "none")
	for _, bad := range [][]string{{"-tls-cert", "x"}, {"-no-auth", "-credentials", "f"}, {"-partitions", "0"}, {"extra"}, {"-dir", ""},
		{"-read-ahead", "-1"}, {"-read-ahead", "65537"}} {
		_, err := parseFlags(bad, &discard{})
		require.Error(t, err, "%q", bad)
	}
}

type discard struct{}

func (*discard) Write(p []byte) (int, error) { return len(p), nil }

// A queue whose topic could not be created is in the catalogue, and the next CreateQueue
// (or start) creates the topic.
func TestCatalogTopicRetried(t *testing.T) {
	c, events := openTestCatalog(t, t.TempDir())
	fail := true
	create := c.createTopic
	c.createTopic = func(topic string, partitions int) error {
		if fail {
			return errors.New("disk full")
		}
		return create(topic, partitions)
	}
	same := func(rec sqsapi.QueueRecord, _ bool) (sqsapi.QueueRecord, error) { return rec, nil }
	_, err := c.PutQueue(context.Background(), "q", same)
	require.Error(t, err)
	rec, ok := c.Queue("q")
	require.True(t, ok)
	require.Equal(t, map[string]int{rec.Topic: 3}, c.queues(), "the next start creates it")
	fail = false
	_, err = c.PutQueue(context.Background(), "q", same)
	require.NoError(t, err)
	require.Equal(t, []string{"create " + rec.Topic}, *events)
}
