package main

import (
	"cmp"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"

	"narad.dev/consume/offsets"
	"narad.dev/consume/router"
)

// partitionRef is a partition directory found in a state directory.
type partitionRef struct {
	topic      string // "" when the topic directory's name gives none back (see topicKnown)
	topicKnown bool
	topicDir   string // the topic directory's name
	partition  int32
	path       string
	// legacyName: the topic directory has the name a release before this one gave it; the
	// node renames it at the topic's first touch. shadowed: it is such a directory beside
	// one of this release's name for the same topic, which the node reads instead: this one
	// is never read.
	legacyName, shadowed bool
}

// otherEntry is an entry of the state directory, or of a topic's, that is no partition's.
type otherEntry struct {
	Path string `json:"path"`
	What string `json:"what"`
}

// stateDir is what a state directory holds.
type stateDir struct {
	partitions []partitionRef
	other      []otherEntry
}

// resetName is how reset names a partition's directory it set aside: the partition's number,
// ".reset-" and the time. The node reads only directories named by a bare number.
var resetName = regexp.MustCompile(`^[0-9]+\.reset-`)

const resetTimeLayout = "20060102T150405.000000000Z"

// topicOf is the topic a directory of the state directory holds: decoded from its name, or
// one of the topics named on the command line whose directory it is (a long topic's
// directory name is a hash that gives the topic back to no one).
func topicOf(name string, named []string) (topic string, legacy, ok bool) {
	if topic, legacy, ok = router.TopicOfDir(name); ok {
		return topic, legacy, ok
	}
	for _, t := range named {
		if router.TopicDir(t) == name {
			return t, false, true
		}
	}
	return "", false, false
}

// scan reads the state directory dir: every partition of the topics named (all topics when
// none is), and what else it holds. It reads directory entries only.
func scan(dir string, topics []string) (stateDir, error) {
	var sd stateDir
	entries, err := os.ReadDir(dir)
	if err != nil {
		return sd, err
	}
	current := map[string]bool{} // topics with a directory of this release's name
	for _, e := range entries {
		if topic, legacy, ok := topicOf(e.Name(), topics); ok && !legacy && isDir(filepath.Join(dir, e.Name()), e) {
			current[topic] = true
		}
	}
	for _, e := range entries {
		name, path := e.Name(), filepath.Join(dir, e.Name())
		topic, legacy, known := topicOf(name, topics)
		switch {
		case name == router.LockName:
			if len(topics) == 0 {
				sd.other = append(sd.other, otherEntry{path, "the node's lock file"})
			}
			continue
		case !isDir(path, e):
			if len(topics) == 0 {
				sd.other = append(sd.other, otherEntry{path, "not the node's: a file where topic directories are"})
			}
			continue
		case len(topics) > 0 && (!known || !slices.Contains(topics, topic)):
			continue
		}
		ref := partitionRef{topic: topic, topicKnown: known, topicDir: name, legacyName: legacy,
			shadowed: legacy && current[topic]}
		found, err := scanTopic(&sd, path, ref)
		if err != nil {
			return sd, err
		}
		if !known && !found {
			sd.other = append(sd.other, otherEntry{path, "not a topic directory: the node does not read it"})
		}
	}
	slices.SortFunc(sd.partitions, func(a, b partitionRef) int {
		return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.topicDir, b.topicDir), cmp.Compare(a.partition, b.partition))
	})
	return sd, nil
}

// isDir reports whether the entry e at path is a directory, or a symbolic link to one (which
// the node follows).
func isDir(path string, e fs.DirEntry) bool {
	if e.Type()&fs.ModeSymlink == 0 {
		return e.IsDir()
	}
	fi, err := os.Stat(path)
	return err == nil && fi.IsDir()
}

// scanTopic adds the partitions of the topic directory path to sd, and its other entries;
// it reports whether it found a partition.
func scanTopic(sd *stateDir, path string, ref partitionRef) (bool, error) {
	entries, err := os.ReadDir(path)
	if err != nil {
		return false, err
	}
	found := false
	var other []otherEntry
	for _, e := range entries {
		p := filepath.Join(path, e.Name())
		part, perr := parsePartition(e.Name())
		switch {
		case perr == nil:
			// A partition directory that is a file is the node's too: it sets the partition
			// aside, and show says why.
			r := ref
			r.partition, r.path = part, p
			sd.partitions = append(sd.partitions, r)
			found = true
		case resetName.MatchString(e.Name()):
			other = append(other, otherEntry{p, "a partition's state set aside by consumestate reset: the node does not read it"})
		default:
			other = append(other, otherEntry{p, "not a partition directory: the node does not read it"})
		}
	}
	if found || ref.topicKnown {
		sd.other = append(sd.other, other...)
	}
	return found, nil
}

// resolve finds the directory of one partition of topic in dir that the node reads: under the
// topic directory of this release's name when that exists, else under the legacy name (the
// node renames it at the topic's first touch).
func resolve(dir, topic string, partition int32) (partitionRef, error) {
	sd, err := scan(dir, []string{topic})
	if err != nil {
		return partitionRef{}, err
	}
	for _, r := range sd.partitions {
		if r.partition == partition && !r.shadowed {
			return r, nil
		}
	}
	if below := stateDirBelow(dir, sd); below != "" {
		return partitionRef{}, errDataDir(dir, below)
	}
	return partitionRef{}, fmt.Errorf("%s holds no directory for partition %s/%d (the node creates %s at the partition's first touch)",
		dir, quote(topic), partition, filepath.Join(dir, router.TopicDir(topic), strconv.Itoa(int(partition))))
}

// dataDirChild is the name of the state directory inside a host's data directory, as the
// examples and the README lay it out (router.Config.Dir is DATA/consumer).
const dataDirChild = "consumer"

// stateDirBelow is dir's dataDirChild when dir looks like a host's data directory rather than
// a state directory: dir holds neither the node's lock file nor a partition (of the topics
// named, sd), and its dataDirChild holds the lock file or a partition. "" otherwise.
func stateDirBelow(dir string, sd stateDir) string {
	if len(sd.partitions) > 0 {
		return ""
	}
	if _, err := os.Lstat(filepath.Join(dir, router.LockName)); err == nil {
		return ""
	}
	below := filepath.Join(dir, dataDirChild)
	if fi, err := os.Stat(below); err != nil || !fi.IsDir() {
		return ""
	}
	if _, err := os.Lstat(filepath.Join(below, router.LockName)); err == nil {
		return below
	}
	if in, err := scan(below, nil); err == nil && len(in.partitions) > 0 {
		return below
	}
	return ""
}

// errDataDir says dir is a host's data directory, whose state directory is below.
func errDataDir(dir, below string) error {
	return fmt.Errorf("%s looks like the host's data directory, not the node's state directory (router.Config.Dir): "+
		"it holds no partition, and %s holds the node's: point at %s", dir, below, below)
}

// refOfPath is the partition whose directory path is: the topic from its parent's name.
func refOfPath(path string) (partitionRef, error) {
	path = filepath.Clean(path)
	part, err := parsePartition(filepath.Base(path))
	if err != nil {
		return partitionRef{}, fmt.Errorf("%s is not a partition's directory: %w", path, err)
	}
	topicDir := filepath.Base(filepath.Dir(path))
	topic, legacy, ok := router.TopicOfDir(topicDir)
	if !ok {
		return partitionRef{}, fmt.Errorf("the name of %s gives no topic (a long topic's directory name is a hash of it): "+
			"name it, as in consumestate show DIR TOPIC %d", filepath.Dir(path), part)
	}
	ref := partitionRef{topic: topic, topicKnown: true, topicDir: topicDir, partition: part, path: path, legacyName: legacy}
	if legacy {
		if fi, err := os.Stat(filepath.Join(filepath.Dir(filepath.Dir(path)), router.TopicDir(topic))); err == nil && fi.IsDir() {
			ref.shadowed = true
		}
	}
	return ref, nil
}

// stateFileNames are the files of a partition directory the node reads or writes.
var stateFileNames = []string{offsets.IDFile, offsets.AheadFile, offsets.OffsetFile, router.MovedFile}
