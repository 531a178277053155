package offsets_test

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"narad.dev/consume/crashfs"
	"narad.dev/consume/offsets"
)

// damageFixture is a partition's three files as a running committer leaves them: the anchor
// and a newer window in consumer.ahead, a levelled consumer.offset trailing them, and
// consumer.id; with the shard's state, the oracle of what was acked.
type damageFixture struct {
	id, ahead, offset []byte
	truth             offsets.State
}

func newDamageFixture(t *testing.T) damageFixture { return damageFixtureOf(t, false) }

// parkedDamageFixture is newDamageFixture on an ordered topic: offsets parked behind their
// keys sit in the acked-ahead runs, unsettled, named by the key tails (version 2 records),
// in the written-out anchor and in the newer window alike.
func parkedDamageFixture(t *testing.T) damageFixture { return damageFixtureOf(t, true) }

// damageFixtureOf writes a partition's files, a written-out anchor and a newer window in the
// page cache, with offsets parked behind their keys in both if parked is set.
func damageFixtureOf(t *testing.T, parked bool) damageFixture {
	fsys := crashfs.New()
	h := newMemHarness(t, fsys, func(c *offsets.Config) { c.Interval = 100 * time.Millisecond })
	offsets.SetLevelInterval(h.c, 100*time.Millisecond)
	h.mkdir("d", 0)
	h.create("d", 0)
	for o := range int64(10) {
		h.ack("d", 0, o)
	}
	h.ack("d", 0, 12, 15)
	if parked {
		h.park("d", 0, 13)
		h.park("d", 0, 16)
	}
	h.ticks(5) // written out and levelled: frontier 9, {12, 15} (parked {13, 16})
	h.ack("d", 0, 10, 17)
	if parked {
		h.park("d", 0, 11)
		h.park("d", 0, 20)
	}
	h.ticks(1) // a newer window in the page cache: frontier 10, {12, 15, 17} (parked {11, 13, 16, 20})
	f := damageFixture{truth: h.shards.Snapshot("d", 0)}
	if parked {
		require.Len(t, f.truth.KeyTails, 2) // keys of 11 and 20, of 13 and 16
	}
	var err error
	f.id, err = fsys.ReadFile(dirOf("d", 0) + "/" + offsets.IDFile)
	require.NoError(t, err)
	f.ahead, err = fsys.ReadFile(aheadPath("d", 0))
	require.NoError(t, err)
	f.offset, err = fsys.ReadFile(offsetPath("d", 0))
	require.NoError(t, err)
	require.Len(t, f.offset, offsets.OffsetFileSize)
	st, err := offsets.Recover("d", 0, f.id, f.ahead, f.offset)
	require.NoError(t, err)
	requireSameState(t, f.truth, st, "the undamaged files recover the live state")
	h.closeCommitter()
	return f
}

// requireNothingSkipped fails unless every offset st settles (up to its frontier, and acked
// ahead but for those its key tails name) was acked in truth: recovery may forget acks, never
// invent them.
func requireNothingSkipped(t *testing.T, truth, st offsets.State, what string) {
	t.Helper()
	acked := func(o int64) bool {
		return o <= truth.Frontier || (offsets.RunsContain(truth.Ahead, o) && !offsets.InTails(truth.KeyTails, o))
	}
	for o := int64(0); o <= st.Frontier; o++ {
		if !acked(o) {
			t.Fatalf("%s: recovered frontier %d passes offset %d, never acked", what, st.Frontier, o)
		}
	}
	for _, o := range offsets.OffsetsOf(st.Ahead) {
		if !acked(o) && !offsets.InTails(st.KeyTails, o) {
			t.Fatalf("%s: recovered acked-ahead offset %d was never acked", what, o)
		}
	}
}

// upgradeDamageFixture is a partition caught in its upgrade from a release before
// consumer.id: the legacy record it started from still the anchor of consumer.ahead, the
// legacy 8-byte consumer.offset, the consumer.id the prime wrote naming what the incarnation
// adopted, and this incarnation's first window, in the page cache, over the older legacy
// record that was the other slot.
func upgradeDamageFixture(t *testing.T) damageFixture {
	fsys := crashfs.New()
	require.NoError(t, fsys.MkdirAll(dirOf("d", 0)))
	k := offsets.PartitionKey("d", 0)
	adopted := slot(t, offsets.Record{Seq: 7, Key: k, Frontier: 9, Ahead: offsets.RunsOf(12, 15),
		Quarantine: []int64{3}, Attempts: []offsets.Attempt{{Offset: 10, Count: 2}}})
	older := slot(t, offsets.Record{Seq: 6, Key: k, Frontier: 6, Ahead: offsets.RunsOf(8)})
	require.NoError(t, fsys.WriteFile(aheadPath("d", 0), append(adopted, older...)))
	require.NoError(t, fsys.WriteFile(offsetPath("d", 0), be64(6)))
	h := newMemHarness(t, fsys, func(c *offsets.Config) { c.Interval = time.Second })
	st := h.create("d", 0)
	require.Equal(t, int64(9), st.Frontier, "the upgrade loads the legacy record")
	h.ack("d", 0, 10, 17)
	h.ticks(1) // primed, and a first window in the page cache: frontier 10, {12, 15, 17}
	f := damageFixture{truth: h.shards.Snapshot("d", 0)}
	var err error
	f.id, err = fsys.ReadFile(dirOf("d", 0) + "/" + offsets.IDFile)
	require.NoError(t, err)
	f.ahead, err = fsys.ReadFile(aheadPath("d", 0))
	require.NoError(t, err)
	f.offset, err = fsys.ReadFile(offsetPath("d", 0))
	require.NoError(t, err)
	require.Len(t, f.id, offsets.AdoptedIDFileSize, "the prime names what the incarnation adopted")
	require.Len(t, f.offset, offsets.LegacyOffsetFileSize, "not levelled yet")
	require.Equal(t, adopted, f.ahead[:offsets.SlotSize], "the adopted record is still the anchor")
	got, err := offsets.Recover("d", 0, f.id, f.ahead, f.offset)
	require.NoError(t, err)
	require.Equal(t, f.truth.Frontier, got.Frontier, "the undamaged files recover the live state")
	withoutWindow := append(slices.Clone(adopted), make([]byte, offsets.SlotSize)...)
	got, err = offsets.Recover("d", 0, f.id, withoutWindow, f.offset)
	require.NoError(t, err)
	require.Equal(t, int64(9), got.Frontier, "the adopted legacy record counts under the consumer.id")
	h.closeCommitter()
	return f
}

// Issue 9, case 2: every single-bit flip and every truncation of each of the three files
// recovers, through Load's rules and ClampToWatermark, no frontier past a record that was not
// acked and no acked-ahead offset that was not (RELIABILITY rows 16, 17; invariant I3). Before
// the files were checksummed, 59 of 64 flips of consumer.offset lost records. The files are
// those of a running committer, and those of a partition in the middle of its upgrade from a
// release before consumer.id (the consumer.id that names the legacy state it adopted).
func TestEveryFlipAndTruncationRecoversNothingUnacked(t *testing.T) {
	c, err := offsets.New(offsets.Config{FS: crashfs.New(), Dir: dirOf, Source: offsets.NewShards()})
	require.NoError(t, err)
	defer c.Close()
	t.Run("running", func(t *testing.T) { enumerateDamage(t, c, newDamageFixture(t), nil) })
	// In the upgrade's consumer.ahead, the bytes past each record's sections are zero padding,
	// whose flips all fail the checksum alike: one bit of each such byte is flipped there.
	upgrade := upgradeDamageFixture(t)
	var padFrom [offsets.AheadSlots]int
	for i := range padFrom {
		s := upgrade.ahead[i*offsets.SlotSize:]
		padFrom[i] = 32 + int(binary.BigEndian.Uint16(s[6:]))
	}
	used := func(file, at int) bool {
		in := at % offsets.SlotSize
		return file != 1 || in < padFrom[at/offsets.SlotSize] || in >= offsets.SlotSize-4
	}
	t.Run("upgrading", func(t *testing.T) { enumerateDamage(t, c, upgrade, used) })
	// Parked offsets (key tails, version 2 records): no damage makes one look acked.
	parked := parkedDamageFixture(t)
	for i := range padFrom {
		s := parked.ahead[i*offsets.SlotSize:]
		padFrom[i] = 32 + int(binary.BigEndian.Uint16(s[6:]))
	}
	t.Run("parked", func(t *testing.T) { enumerateDamage(t, c, parked, used) })
}

// enumerateDamage recovers from every single-bit flip, every truncation and the loss of each
// of f's files in turn, and fails on anything unacked recovered. every(file, at) says whether
// to flip every bit of byte at of file (0 consumer.id, 1 consumer.ahead, 2 consumer.offset),
// or only one; nil flips them all.
func enumerateDamage(t *testing.T, c *offsets.Committer, f damageFixture, every func(file, at int) bool) {
	const hwm = 30
	check := func(files [3][]byte, what string) {
		st, err := offsets.Recover("d", 0, files[0], files[1], files[2])
		if err != nil {
			require.ErrorIs(t, err, offsets.ErrNewerSlot, what) // a flip into a newer version's record
			return
		}
		st = c.ClampToWatermark("d", 0, st, hwm)
		requireNothingSkipped(t, f.truth, st, what)
	}
	orig := [3][]byte{f.id, f.ahead, f.offset}
	names := [3]string{offsets.IDFile, offsets.AheadFile, offsets.OffsetFile}
	cases := 0
	for i := range orig {
		for bit := range len(orig[i]) * 8 {
			if every != nil && bit%8 != (bit/8)%8 && !every(i, bit/8) {
				continue
			}
			files := orig
			files[i] = slices.Clone(orig[i])
			files[i][bit/8] ^= 1 << (bit % 8)
			check(files, fmt.Sprintf("%s bit %d flipped", names[i], bit))
			cases++
		}
		for n := range len(orig[i]) {
			files := orig
			files[i] = orig[i][:n]
			check(files, fmt.Sprintf("%s cut to %d bytes", names[i], n))
			cases++
		}
		files := orig
		files[i] = nil
		check(files, names[i]+" missing")
		cases++
	}
	t.Logf("%d damaged file sets recovered nothing unacked", cases)
}

// A foreign or stale file is ignored, loudly: another partition's consumer.offset, state files
// of an earlier incarnation, files copied without their consumer.id.
func TestForeignAndStaleFilesIgnored(t *testing.T) {
	f := newDamageFixture(t)
	other := newDamageFixture(t) // another incarnation of the same partition
	otherPartition := make([]byte, offsets.OffsetFileSize)
	copy(otherPartition, f.offset)
	tests := []struct {
		name              string
		id, ahead, offset []byte
		wantFound         bool
	}{
		{"an earlier incarnation's files under this consumer.id", f.id, other.ahead, other.offset, false},
		{"an earlier incarnation's consumer.offset beside this one's slots", f.id, f.ahead, other.offset, true},
		{"state files copied without consumer.id", nil, f.ahead, f.offset, false},
		{"consumer.id damaged", append(slices.Clone(f.id[:20]), 0, 0, 0, 0), f.ahead, f.offset, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logs := &offsets.LogRecorder{}
			fsys := crashfs.New()
			require.NoError(t, fsys.MkdirAll(dirOf("d", 0)))
			for name, b := range map[string][]byte{offsets.IDFile: tt.id, offsets.AheadFile: tt.ahead, offsets.OffsetFile: tt.offset} {
				if b != nil {
					require.NoError(t, fsys.WriteFile(dirOf("d", 0)+"/"+name, b))
				}
			}
			c, err := offsets.New(offsets.Config{FS: fsys, Dir: dirOf, Source: offsets.NewShards(), Logger: slog.New(logs)})
			require.NoError(t, err)
			defer c.Close()
			st, err := c.Load("d", 0)
			require.NoError(t, err)
			require.Equal(t, tt.wantFound, st.Found)
			if st.Found {
				require.Equal(t, f.truth.Frontier, st.Frontier, "this incarnation's own slots")
			}
			require.NotZero(t, st.Incarnation)
			require.NotEmpty(t, logs.Lines("consumer offsets: ignoring damaged or foreign persisted state; "+
				"records it would have settled are delivered again"), "ignored loudly")
			require.Equal(t, uint64(1), c.Stats().IgnoredFiles)
		})
	}

	// Another partition's consumer.offset, of the current form, is not this partition's.
	st, err := offsets.Recover("d", 1, nil, nil, f.offset)
	require.NoError(t, err)
	require.False(t, st.Found)
}

// Issue 9, case 9: a consumer.ahead that is present but unusable (short, torn, both slots bad)
// is logged and counted by Load (Peek, a look, neither logs nor counts); blank slots (a
// prime's extension) are not damage.
func TestUnusableAheadLoggedAndCounted(t *testing.T) {
	f := newDamageFixture(t)
	bad := slices.Clone(f.ahead)
	bad[100] ^= 1
	bad[offsets.SlotSize+100] ^= 1
	for _, tt := range []struct {
		name  string
		ahead []byte
		want  bool
	}{
		{"both slots bit-flipped", bad, true},
		{"short", f.ahead[:1000], true},
		{"blank", make([]byte, offsets.AheadFileSize), false},
		{"empty", []byte{}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			logs := &offsets.LogRecorder{}
			fsys := crashfs.New()
			require.NoError(t, fsys.MkdirAll(dirOf("d", 0)))
			require.NoError(t, fsys.WriteFile(aheadPath("d", 0), tt.ahead))
			c, err := offsets.New(offsets.Config{FS: fsys, Dir: dirOf, Source: offsets.NewShards(), Logger: slog.New(logs)})
			require.NoError(t, err)
			defer c.Close()
			for range 2 { // a look, however often: nothing logged or counted
				peeked, err := c.Peek("d", 0)
				require.NoError(t, err)
				require.False(t, peeked.Found)
			}
			require.Empty(t, logs.Lines("consumer offsets: ignoring damaged or foreign persisted state; "+
				"records it would have settled are delivered again"), "Peek logs nothing")
			require.Zero(t, c.Stats().IgnoredFiles, "Peek counts nothing")
			st, err := c.Load("d", 0)
			require.NoError(t, err)
			require.False(t, st.Found)
			lines := logs.Lines("consumer offsets: ignoring damaged or foreign persisted state; " +
				"records it would have settled are delivered again")
			if !tt.want {
				require.Empty(t, lines)
				require.Zero(t, c.Stats().IgnoredFiles)
				return
			}
			require.Len(t, lines, 1)
			require.True(t, lines[0]["unusable_consumer_ahead"].Bool())
			require.Equal(t, uint64(1), c.Stats().IgnoredFiles)
		})
	}
}

// A frontier at or above the high watermark: from a verified file the log lost its tail (clamp),
// from the legacy unverifiable consumer.offset it is damage (start afresh, keep the backlog).
func TestWatermarkRuleByTrust(t *testing.T) {
	c, err := offsets.New(offsets.Config{FS: crashfs.New(), Dir: dirOf, Source: offsets.NewShards()})
	require.NoError(t, err)
	defer c.Close()
	f := newDamageFixture(t)
	verified, err := offsets.Recover("d", 0, f.id, f.ahead, f.offset)
	require.NoError(t, err)
	clamped := c.ClampToWatermark("d", 0, verified, 5)
	require.True(t, clamped.Found)
	require.Equal(t, int64(4), clamped.Frontier, "a verified frontier is clamped below the watermark")

	legacy, err := offsets.Recover("d", 0, nil, nil, be64(1<<40))
	require.NoError(t, err)
	require.True(t, legacy.Found && legacy.Unverified)
	dropped := c.ClampToWatermark("d", 0, legacy, 5)
	require.False(t, dropped.Found, "an unverifiable frontier past the watermark is damage: start afresh")
	require.Equal(t, uint64(2), c.Stats().Clamps)
}

// The record loss this guards against: a backup of a deleted topic's earlier life, taken by a
// release before consumer.id (legacy slots and an 8-byte consumer.offset, naming no
// incarnation), restored into the directory of the topic created again under the name. The
// new consumer.id is valid and did not adopt those records, so they must not count: Load
// keeps the new incarnation's own state (or none), logs what it ignored and counts it, and
// the partition delivers again rather than skip offsets the new life never acked.
func TestLegacyStateRestoredUnderNewIncarnationIgnored(t *testing.T) {
	fsys := crashfs.New()
	h := newMemHarness(t, fsys, func(c *offsets.Config) { c.Interval = 100 * time.Millisecond })
	h.mkdir("d", 0)
	h.create("d", 0)
	h.ack("d", 0, 0, 1, 2, 3, 5)
	h.ticks(3) // written out: frontier 3, {5}, under a fresh consumer.id
	truth := h.shards.Snapshot("d", 0)
	h.closeCommitter()
	id, err := fsys.ReadFile(dirOf("d", 0) + "/" + offsets.IDFile)
	require.NoError(t, err)
	require.Len(t, id, offsets.IDFileSize, "a fresh incarnation adopts nothing")
	ours, err := fsys.ReadFile(aheadPath("d", 0))
	require.NoError(t, err)

	k := offsets.PartitionKey("d", 0)
	legacyNew := slot(t, offsets.Record{Seq: 90, Key: k, Frontier: 39, Ahead: offsets.RunsOf(41, 44),
		Quarantine: []int64{40}, Attempts: []offsets.Attempt{{Offset: 42, Count: 2}}})
	legacyOld := slot(t, offsets.Record{Seq: 89, Key: k, Frontier: 17, Ahead: offsets.RunsOf(20)})
	// A legacy slot in place of the older of this incarnation's two.
	mixed := slices.Clone(ours)
	older := 0
	if s0, s1 := decodeAt(t, ours, 0), decodeAt(t, ours, 1); s1 == nil || (s0 != nil && s0.Seq > s1.Seq) {
		older = 1
	}
	copy(mixed[older*offsets.SlotSize:], legacyNew)
	tests := []struct {
		name          string
		ahead, offset []byte
		wantFound     bool
		wantIgnored   int64 // legacy records that would have been taken
	}{
		{"legacy slots and consumer.offset restored", append(slices.Clone(legacyOld), legacyNew...), be64(39), false, 3},
		{"legacy slots restored", append(slices.Clone(legacyNew), legacyOld...), nil, false, 2},
		{"legacy consumer.offset restored, consumer.ahead lost", nil, be64(39), false, 1},
		{"a newer legacy slot beside this incarnation's", mixed, nil, true, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fsys := crashfs.New()
			require.NoError(t, fsys.MkdirAll(dirOf("d", 0)))
			require.NoError(t, fsys.WriteFile(dirOf("d", 0)+"/"+offsets.IDFile, id))
			if tt.ahead != nil {
				require.NoError(t, fsys.WriteFile(aheadPath("d", 0), tt.ahead))
			}
			if tt.offset != nil {
				require.NoError(t, fsys.WriteFile(offsetPath("d", 0), tt.offset))
			}
			h := newMemHarness(t, fsys, func(c *offsets.Config) { c.Interval = 100 * time.Millisecond })
			st := h.create("d", 0)
			requireNothingSkipped(t, truth, st, tt.name)
			require.Equal(t, tt.wantFound, st.Found)
			if st.Found {
				requireSameState(t, truth, st, "this incarnation's own slot")
			}
			lines := h.logs.Lines("consumer offsets: ignoring damaged or foreign persisted state; " +
				"records it would have settled are delivered again")
			require.Len(t, lines, 1, "ignored loudly")
			require.Equal(t, tt.wantIgnored, lines[0]["legacy_under_incarnation"].Int64())
			require.Equal(t, uint64(1), h.c.Stats().IgnoredFiles)

			// The partition goes on from what it loaded, under its own consumer.id: the prime
			// does not take the legacy records up, nor mark the consumer.id as adopting them.
			h.ack("d", 0, st.Frontier+1)
			h.ticks(3)
			require.NoError(t, h.c.Close())
			cut := fsys.PowerCut(crashfs.PowerCut{})
			got := recoverOn(t, cut, "d", 0)
			requireSameState(t, h.shards.Snapshot("d", 0), got, "what the partition acked since")
			idAfter, err := cut.ReadFile(dirOf("d", 0) + "/" + offsets.IDFile)
			require.NoError(t, err)
			require.Equal(t, id, idAfter, "consumer.id as it was")
		})
	}
}

// decodeAt decodes slot i of a consumer.ahead, or nil when it holds no valid record.
func decodeAt(t *testing.T, ahead []byte, i int) *offsets.Record {
	var r offsets.Record
	if offsets.DecodeSlot(ahead[i*offsets.SlotSize:(i+1)*offsets.SlotSize], &r) != nil {
		return nil
	}
	return &r
}
