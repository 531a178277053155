package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/offsets"
)

// fullSweepEnv, set to 1, runs every damaged variant, and each through the whole command,
// files on disk and all (about a minute). By default the zero padding of consumer.ahead's
// slots, whose flips and cuts all read alike (a checksum mismatch, a partial slot), is
// sampled, and a sample of the variants goes through the whole command; the rest go through
// the in-memory path, which is the same code past the reading of the files.
const fullSweepEnv = "CONSUMESTATE_FULL_SWEEP"

// stateFiles are a partition's consumer.id, consumer.ahead and consumer.offset; nil when
// missing.
type stateFiles [3][]byte

var stateFileOrder = [3]string{offsets.IDFile, offsets.AheadFile, offsets.OffsetFile}

func readStateFiles(t testing.TB, dir string) stateFiles {
	t.Helper()
	var f stateFiles
	for i, name := range stateFileOrder {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if !errors.Is(err, os.ErrNotExist) {
			require.NoError(t, err)
			f[i] = b
		}
	}
	return f
}

func writeStateFiles(t testing.TB, dir string, f stateFiles) {
	t.Helper()
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for i, name := range stateFileOrder {
		path := filepath.Join(dir, name)
		if f[i] == nil {
			require.NoError(t, os.RemoveAll(path))
			continue
		}
		require.NoError(t, os.WriteFile(path, f[i], 0o644))
	}
}

// variant is a partition's files with one of them damaged, and how.
type variant struct {
	what  string
	files stateFiles
}

// damageVariants is the enumeration of offsets' damage tests (damage_test.go there): every
// byte of each file with one bit flipped (bit at%8 of byte at), every truncation, and each
// file missing. keep(file, at) says whether to take the flip of byte at, or the cut to at
// bytes, of file (0 consumer.id, 1 consumer.ahead, 2 consumer.offset); nil takes all.
func damageVariants(orig stateFiles, keep func(file, at int) bool) []variant {
	var vs []variant
	for i := range orig {
		for at := range len(orig[i]) {
			if keep != nil && !keep(i, at) {
				continue
			}
			files := orig
			files[i] = slices.Clone(orig[i])
			files[i][at] ^= 1 << (at % 8)
			vs = append(vs, variant{fmt.Sprintf("%s byte %d flipped", stateFileOrder[i], at), files})
		}
		for n := range len(orig[i]) {
			if keep != nil && !keep(i, n) {
				continue
			}
			files := orig
			files[i] = orig[i][:n]
			vs = append(vs, variant{fmt.Sprintf("%s cut to %d bytes", stateFileOrder[i], n), files})
		}
		files := orig
		files[i] = nil
		vs = append(vs, variant{stateFileOrder[i] + " missing", files})
	}
	return vs
}

// upgradeState leaves in c.dir the partition orders/0 of a node upgraded from a release
// before consumer.id: legacy records (no incarnation) and a legacy consumer.offset, which the
// node adopted (the 44-byte consumer.id) and went on from.
func upgradeState(t testing.TB, c *cluster) {
	t.Helper()
	dir := filepath.Join(c.dir, topicOrders, "0")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	k := offsets.PartitionKey(topicOrders, 0)
	legacy := make([]byte, offsets.AheadFileSize)
	for i, r := range []offsets.Record{
		{Seq: 7, Key: k, Frontier: 5, Ahead: []offsets.Run{{First: 7, Last: 7}, {First: 9, Last: 9}}, Quarantine: []int64{2}, Attempts: []offsets.Attempt{{Offset: 6, Count: 1}}},
		{Seq: 6, Key: k, Frontier: 3, Ahead: []offsets.Run{{First: 5, Last: 5}}},
	} {
		_, err := offsets.EncodeSlot(legacy[i*offsets.SlotSize:], &r)
		require.NoError(t, err)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, offsets.AheadFile), legacy, 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, offsets.OffsetFile), binary.BigEndian.AppendUint64(nil, 5), 0o644))
	n := c.start(t)
	c.append(n, topicOrders, 0, 12)
	msgs := consume(t, n, topicOrders, 0, 1)
	require.Len(t, msgs, 1)
	require.Equal(t, int64(6), msgs[0].Offset, "the upgrade keeps the legacy frontier")
	settle(t, n, msgs, []int64{6}, nil)
	require.NoError(t, n.Close())
	id, err := os.ReadFile(filepath.Join(dir, offsets.IDFile))
	require.NoError(t, err)
	require.Len(t, id, offsets.AdoptedIDFileSize, "the upgrade names what it adopted")
}

// sampled keeps, of consumer.ahead, the bytes of each slot's header, sections and checksum,
// those near a slot's bounds, and one in 64 of the rest (zero padding); of the other files
// everything.
func sampled(ahead []byte) func(file, at int) bool {
	return func(file, at int) bool {
		if file != 1 {
			return true
		}
		in := at % offsets.SlotSize
		used := 32
		if s := ahead[at-in:]; len(s) >= 8 {
			used += int(binary.BigEndian.Uint16(s[6:]))
		}
		return in < used+8 || in >= offsets.SlotSize-8 || at%64 == 0
	}
}

// checkVariant runs the in-memory path of show and verify over files: the inspection, the
// report, its text and its JSON. It fails on a panic and on a report that does not say what
// recovery does.
func checkVariant(t *testing.T, v variant, ref partitionRef) (verdict string) {
	t.Helper()
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("%s: panic: %v", v.what, p)
		}
	}()
	in := offsets.InspectFiles(ref.topic, ref.partition, v.files[0], v.files[1], v.files[2])
	r := partitionReport{Topic: ref.topic, TopicKnown: true, TopicDir: ref.topicDir, Partition: ref.partition, Dir: ref.path}
	aheadSize := int64(-1)
	if v.files[1] != nil {
		aheadSize = int64(len(v.files[1]))
	}
	describe(&r, &in, ref, false, aheadSize)

	st, err := offsets.Recover(ref.topic, ref.partition, v.files[0], v.files[1], v.files[2])
	require.Equal(t, err, in.Err, v.what)
	require.Equal(t, st, in.State, v.what)
	want := verdictOK
	switch {
	case errors.Is(err, offsets.ErrNewerSlot):
		want = verdictRefused
		require.NotEmpty(t, r.Recovery.Refused, v.what)
	case err != nil:
		t.Fatalf("%s: recovery fails with %v", v.what, err)
	case in.Ignored.Any():
		want = verdictIgnored
	case wrongAheadSize(v.files):
		want = verdictDamaged
	}
	require.Equal(t, want, r.Verdict, v.what)
	switch want {
	case verdictOK:
		require.Empty(t, r.Ignored, v.what)
	case verdictIgnored:
		require.NotEmpty(t, r.Ignored, v.what)
	case verdictDamaged:
		require.Empty(t, r.Ignored, v.what)
	}
	require.Equal(t, wrongAheadSize(v.files), len(r.Damaged) > 0, "%s: %v", v.what, r.Damaged)
	for _, f := range r.Ignored {
		require.NotEqual(t, "state files", f.File, "%s: a case the findings do not explain: %s", v.what, f.Reason)
	}
	require.Equal(t, st.Found, r.Recovery.Found, v.what)
	require.Equal(t, st.Frontier, r.Recovery.Frontier, v.what)
	require.Equal(t, int(aheadCount(st.Ahead)), r.Recovery.AckedAheadCount, v.what)
	require.Equal(t, keyTailsOf(st.KeyTails), r.Recovery.KeyTails, v.what)
	require.NotEmpty(t, r.Recovery.Why, v.what)

	var out bytes.Buffer
	tl := &tool{stdout: &out, stderr: &out}
	tl.printShow(&r, readNote)
	tl.printVerify(&r)
	require.Contains(t, out.String(), "verdict    "+r.Verdict+"\n", v.what)
	_, err = json.Marshal(report{Dir: filepath.Dir(filepath.Dir(ref.path)), Partitions: []partitionReport{r}})
	require.NoError(t, err, v.what)
	return r.Verdict
}

// wrongAheadSize reports whether consumer.ahead has a size no node leaves: not its three
// slots, nor an older release's two, nor empty before any consumer.offset (a first prime
// under way).
func wrongAheadSize(f stateFiles) bool {
	n := len(f[1])
	return f[1] != nil && n != offsets.AheadFileSize && n != 2*offsets.SlotSize && (n != 0 || f[2] != nil)
}

// Issue 26, "how to prove it": every damaged variant of the state-file enumeration (every
// byte's bit flip, every truncation and each file missing, of a running node's files and of
// an upgraded one's, and the fuzz corpus of recovery) goes through show and verify without a
// panic, with a verdict and findings that say what recovery does with it. A sample (all of
// them with CONSUMESTATE_FULL_SWEEP=1) goes through the whole command with the files on disk.
func TestEveryDamagedFile(t *testing.T) {
	full := os.Getenv(fullSweepEnv) == "1"
	running := newCluster(t.TempDir())
	buildState(t, running)
	upgraded := newCluster(t.TempDir())
	upgradeState(t, upgraded)
	for _, fx := range []struct {
		name string
		c    *cluster
	}{{"running", running}, {"upgraded", upgraded}} {
		t.Run(fx.name, func(t *testing.T) {
			ref, err := resolve(fx.c.dir, topicOrders, 0)
			require.NoError(t, err)
			orig := readStateFiles(t, ref.path)
			require.Equal(t, verdictOK, checkVariant(t, variant{"undamaged", orig}, ref))
			keep := sampled(orig[1])
			if full {
				keep = nil
			}
			variants := append(damageVariants(orig, keep), corpusVariants(t, orig)...)
			counts := map[string]int{}
			disk := 0
			for i, v := range variants {
				verdict := checkVariant(t, v, ref)
				counts[verdict]++
				if full || i%17 == 0 || strings.HasSuffix(v.what, "missing") {
					checkOnDisk(t, fx.c.dir, ref, v, verdict)
					disk++
				}
			}
			writeStateFiles(t, ref.path, orig)
			t.Logf("%d damaged variants (%d through the whole command): %v", len(variants), disk, counts)
			require.NotZero(t, counts[verdictIgnored])
		})
	}
}

// checkOnDisk writes v's files into the partition's directory and runs show and verify over
// it, as an operator would.
func checkOnDisk(t *testing.T, dir string, ref partitionRef, v variant, verdict string) {
	t.Helper()
	writeStateFiles(t, ref.path, v.files)
	part := strconv.Itoa(int(ref.partition))
	res := runTool(t, time.Time{}, "show", dir, ref.topic, part)
	require.Equal(t, exitOK, res.code, "%s: %s", v.what, res.stderr)
	require.Empty(t, res.stderr, v.what)
	require.Contains(t, res.stdout, "verdict    "+verdict+"\n", v.what)
	rep, res := verifyJSON(t, dir, ref.topic, part)
	require.Empty(t, res.stderr, v.what)
	require.Len(t, rep.Partitions, 1)
	require.Equal(t, verdict, rep.Partitions[0].Verdict, v.what)
	if verdict == verdictOK {
		require.Equal(t, exitOK, res.code, v.what)
	} else {
		require.Equal(t, exitFindings, res.code, v.what)
	}
}

// corpusVariants are the inputs of recovery's fuzz corpus (offsets/testdata/fuzz/FuzzRecover:
// a slot, a second slot and consumer.offset), beside the partition's own consumer.id: each
// slot raw (consumer.ahead the two laid end to end), and each padded into a whole slot.
func corpusVariants(t *testing.T, orig stateFiles) []variant {
	t.Helper()
	paths, err := filepath.Glob("../../offsets/testdata/fuzz/FuzzRecover/*")
	require.NoError(t, err)
	require.NotEmpty(t, paths, "recovery's fuzz corpus")
	var vs []variant
	for _, path := range paths {
		args := readCorpusFile(t, path)
		require.Len(t, args, 3, path)
		padded := make([]byte, offsets.AheadFileSize)
		copy(padded, args[0][:min(len(args[0]), offsets.SlotSize)])
		copy(padded[offsets.SlotSize:], args[1][:min(len(args[1]), offsets.SlotSize)])
		vs = append(vs,
			variant{path + " raw", stateFiles{orig[0], append(slices.Clone(args[0]), args[1]...), args[2]}},
			variant{path + " padded", stateFiles{orig[0], padded, args[2]}})
	}
	return vs
}

// readCorpusFile reads a "go test fuzz v1" file of []byte arguments.
func readCorpusFile(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	sc := bufio.NewScanner(bytes.NewReader(data))
	require.True(t, sc.Scan())
	require.Equal(t, "go test fuzz v1", sc.Text(), path)
	var args [][]byte
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		quoted, ok := strings.CutPrefix(line, "[]byte(")
		require.True(t, ok, "%s: %s", path, line)
		s, err := strconv.Unquote(strings.TrimSuffix(quoted, ")"))
		require.NoError(t, err, "%s: %s", path, line)
		args = append(args, []byte(s))
	}
	return args
}
