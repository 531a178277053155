package main

import (
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"narad.dev/consume/offsets"
)

// list prints every partition of dir (of the topics named, when some are) with a summary.
func (t *tool) list(dir string, topics []string, asJSON bool) int {
	rep, code := t.readDir(dir, topics)
	if code != exitOK {
		return code
	}
	if asJSON {
		for i := range rep.Partitions {
			rep.Partitions[i].Decoded = nil
		}
		return t.printJSON(rep)
	}
	w := t.stdout
	fmt.Fprintf(w, "State directory %s\nNote: %s.\n\n", rep.Dir, rep.Note)
	if len(rep.Partitions) == 0 {
		fmt.Fprintln(w, "No partitions.")
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tPARTITION\tVERDICT\tFRONTIER\tACKED AHEAD\tQUARANTINED\tINCARNATION\tFILES")
		for _, p := range rep.Partitions {
			frontier, ahead, quarantined, incarnation := "-", "-", "-", "-"
			if rec := p.Recovery; rec != nil && rec.Refused == "" {
				if rec.Found {
					frontier = strconv.FormatInt(rec.Frontier, 10)
				} else {
					frontier = "none"
				}
				if rec.AckedAheadCount > 0 {
					ahead = fmt.Sprintf("%d in %s", rec.AckedAheadCount, plural(int64(len(rec.AckedAhead)), "run"))
					if k := len(rec.KeyTails); k > 0 {
						ahead += fmt.Sprintf(", %s parked", plural(int64(k), "key"))
					}
				} else {
					ahead = "none"
				}
				quarantined = strconv.Itoa(rec.QuarantineCount)
				if rec.Incarnation != "" {
					incarnation = rec.Incarnation
				} else {
					incarnation = "fresh"
				}
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n", topicLabel(&p), p.Partition, p.Verdict, frontier, ahead,
				quarantined, incarnation, filesLabel(p.Files))
		}
		tw.Flush()
	}
	printOther(w, rep.Other)
	return exitOK
}

// show prints one partition's files decoded: args are DIR TOPIC PARTITION, or a partition's
// directory.
func (t *tool) show(args []string, asJSON bool) int {
	var ref partitionRef
	var err error
	dir := ""
	if len(args) == 1 {
		ref, err = refOfPath(args[0])
		dir = filepath.Dir(filepath.Dir(filepath.Clean(args[0])))
	} else {
		dir = args[0]
		var part int32
		if part, err = parsePartition(args[2]); err == nil {
			ref, err = resolve(dir, args[1], part)
		}
	}
	if err != nil {
		return t.fail("%v", err)
	}
	rep := report{Dir: dir, Note: readNote, Partitions: []partitionReport{inspectPartition(ref)}}
	if asJSON {
		return t.printJSON(rep)
	}
	t.printShow(&rep.Partitions[0], rep.Note)
	return exitOK
}

// verify says what recovery makes of each partition named (all of dir's when none is) and
// exits with exitFindings when any is not ok.
func (t *tool) verify(args []string, asJSON bool) int {
	dir := args[0]
	var rep report
	switch len(args) {
	case 3:
		part, err := parsePartition(args[2])
		if err != nil {
			return t.fail("%v", err)
		}
		ref, err := resolve(dir, args[1], part)
		if err != nil {
			return t.fail("%v", err)
		}
		rep = report{Dir: dir, Note: readNote, Partitions: []partitionReport{inspectPartition(ref)}}
	default:
		var code int
		if rep, code = t.readDir(dir, args[1:]); code != exitOK {
			return code
		}
		if len(args) == 2 && len(rep.Partitions) == 0 {
			return t.fail("%s holds no partition of topic %s", dir, quote(args[1]))
		}
	}
	code := exitOK
	for _, p := range rep.Partitions {
		if slices.Contains(badVerdicts, p.Verdict) {
			code = exitFindings
		}
	}
	if asJSON {
		for i := range rep.Partitions {
			rep.Partitions[i].Decoded = nil
		}
		if c := t.printJSON(rep); c != exitOK {
			return c
		}
		return code
	}
	w := t.stdout
	fmt.Fprintf(w, "State directory %s\nNote: %s.\n", rep.Dir, rep.Note)
	counts := map[string]int{}
	for i := range rep.Partitions {
		p := &rep.Partitions[i]
		counts[p.Verdict]++
		fmt.Fprintln(w)
		t.printVerify(p)
	}
	printOther(w, rep.Other)
	var summary []string
	for _, v := range append([]string{verdictOK, verdictMoved}, badVerdicts...) {
		if counts[v] > 0 {
			summary = append(summary, fmt.Sprintf("%d %s", counts[v], v))
		}
	}
	fmt.Fprintf(w, "\n%s", plural(int64(len(rep.Partitions)), "partition"))
	if len(summary) > 0 {
		fmt.Fprintf(w, ": %s", strings.Join(summary, ", "))
	}
	fmt.Fprintln(w, ".")
	return code
}

// readDir inspects every partition of dir (of the topics named, when some are).
func (t *tool) readDir(dir string, topics []string) (report, int) {
	sd, err := scan(dir, topics)
	if err != nil {
		return report{}, t.fail("read the state directory: %v", err)
	}
	if below := stateDirBelow(dir, sd); below != "" {
		return report{}, t.fail("%v", errDataDir(dir, below))
	}
	rep := report{Dir: dir, Note: readNote, Partitions: []partitionReport{}, Other: sd.other}
	for _, ref := range sd.partitions {
		rep.Partitions = append(rep.Partitions, inspectPartition(ref))
	}
	return rep, exitOK
}

func (t *tool) printJSON(v any) int {
	enc := json.NewEncoder(t.stdout)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return t.fail("write JSON: %v", err)
	}
	return exitOK
}

func topicLabel(p *partitionReport) string {
	switch {
	case !p.TopicKnown:
		return "? (" + p.TopicDir + ")"
	case p.LegacyTopicDir:
		return quote(p.Topic) + " (legacy " + p.TopicDir + ")"
	}
	return quote(p.Topic)
}

func filesLabel(files []fileEntry) string {
	var names []string
	for _, f := range files {
		n := strings.TrimPrefix(f.Name, "consumer.")
		if f.Kind != "file" {
			n += "(" + f.Kind + ")"
		}
		names = append(names, n)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

func printOther(w io.Writer, other []otherEntry) {
	if len(other) == 0 {
		return
	}
	fmt.Fprintln(w, "\nOther entries:")
	for _, o := range other {
		fmt.Fprintf(w, "  %s: %s\n", o.Path, o.What)
	}
}

// maxTextRuns is how many runs of a set the text output prints; -json prints them all.
const maxTextRuns = 32

func runsText(runs []run) string {
	if len(runs) == 0 {
		return "none"
	}
	var b strings.Builder
	count := int64(0)
	for i, r := range runs {
		count += r[1] - r[0] + 1
		if i >= maxTextRuns {
			continue
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		if r[0] == r[1] {
			fmt.Fprintf(&b, "%d", r[0])
		} else {
			fmt.Fprintf(&b, "%d-%d", r[0], r[1])
		}
	}
	if len(runs) > maxTextRuns {
		fmt.Fprintf(&b, " ... and %d more runs (-json prints them all)", len(runs)-maxTextRuns)
	}
	fmt.Fprintf(&b, " (%s in %s)", plural(count, "offset"), plural(int64(len(runs)), "run"))
	return b.String()
}

// plural is n and the noun, with an s when n is not 1.
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.FormatInt(n, 10) + " " + noun + "s"
}

// keyTailsText prints key tails: each key's parked records, from the offset given.
func keyTailsText(ks []keyTail) string {
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("key %s from %d", k.Key, k.From)
	}
	return strings.Join(parts, ", ") + " (parked, not settled: delivered again)"
}

func attemptsText(as []attempts) string {
	if len(as) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, a := range as {
		if i >= maxTextRuns {
			fmt.Fprintf(&b, " ... and %d more (-json prints them all)", len(as)-maxTextRuns)
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%d:%d", a.Offset, a.Count)
	}
	return b.String() + " (offset:deliveries)"
}

func (t *tool) printShow(p *partitionReport, note string) {
	w := t.stdout
	fmt.Fprintf(w, "Partition %s/%d\n  directory  %s\n  verdict    %s\n  note       %s.\n", topicLabel(p), p.Partition, p.Dir, p.Verdict, note)
	if len(p.Files) > 0 {
		fmt.Fprintf(w, "  files      ")
		for i, f := range p.Files {
			if i > 0 {
				fmt.Fprint(w, ", ")
			}
			fmt.Fprintf(w, "%s (%d bytes", f.Name, f.Size)
			if f.Kind != "file" {
				fmt.Fprintf(w, ", a %s", f.Kind)
			}
			fmt.Fprint(w, ")")
		}
		fmt.Fprintln(w)
	}
	if len(p.OtherEntries) > 0 {
		fmt.Fprintf(w, "  not read   %s\n", strings.Join(p.OtherEntries, ", "))
	}
	if p.Error != "" {
		fmt.Fprintf(w, "  error      %s\n", p.Error)
	}
	if d := p.Decoded; d != nil {
		fmt.Fprintln(w)
		printID(w, &d.ID)
		printAhead(w, &d.Ahead)
		printOffset(w, &d.Offset)
	}
	if p.Recovery != nil {
		fmt.Fprintln(w)
		printRecovery(w, p, "")
	}
	fmt.Fprintf(w, "\nNext start: %s.\n", p.NextStart)
}

func presence(present bool, read int) string {
	if !present {
		return "missing"
	}
	return fmt.Sprintf("%d bytes", read)
}

func printID(w io.Writer, v *idView) {
	fmt.Fprintf(w, "consumer.id      %s", presence(v.Present, v.Read))
	switch {
	case !v.Present:
		fmt.Fprintln(w)
		return
	case !v.Valid:
		fmt.Fprintf(w, ", ignored: %s\n", v.Error)
		return
	}
	fmt.Fprintf(w, ", valid\n  incarnation    %s\n", v.Incarnation)
	if v.HostIncarnation != "" {
		// Only a node whose host names the same incarnation of the topic trusts the state.
		fmt.Fprintf(w, "  bound to       host incarnation %s of the topic\n", v.HostIncarnation)
	}
	switch {
	case !v.Adopted:
		fmt.Fprintln(w, "  adopted        nothing (a fresh incarnation)")
	case v.AdoptedSeq != nil:
		fmt.Fprintf(w, "  adopted        the legacy state of an upgrade: frontier %d, the record of seq %d and checksum %s\n",
			*v.AdoptedFrontier, *v.AdoptedSeq, v.AdoptedChecksum)
	default:
		fmt.Fprintf(w, "  adopted        the legacy state of an upgrade: frontier %d, from a legacy consumer.offset\n", *v.AdoptedFrontier)
	}
}

func printAhead(w io.Writer, v *aheadView) {
	fmt.Fprintf(w, "consumer.ahead   %s\n", presence(v.Present, v.Read))
	if !v.Present {
		return
	}
	for _, s := range v.Slots {
		fmt.Fprintf(w, "  slot %d         %s", s.Slot, s.Status)
		switch {
		case s.Error != "":
			fmt.Fprintf(w, ": %s", s.Error)
		case s.Status == offsets.SlotBlank.String():
			fmt.Fprint(w, " (no record written into it yet; no damage)")
		}
		fmt.Fprintln(w)
		if s.Frontier == nil {
			continue
		}
		key := "this partition's"
		if !s.KeyOK {
			key = "another partition's"
		}
		incarnation := s.Incarnation
		if incarnation == "" {
			incarnation = "none (a legacy record)"
		}
		fmt.Fprintf(w, "    seq          %d\n    frontier     %d\n    key          %s (%s)\n    incarnation  %s\n",
			s.Seq, *s.Frontier, s.Key, key, incarnation)
		fmt.Fprintf(w, "    acked ahead  %s\n", runsText(s.AckedAhead))
		if len(s.KeyTails) > 0 {
			fmt.Fprintf(w, "    key tails    %s\n", keyTailsText(s.KeyTails))
		}
		fmt.Fprintf(w, "    attempts     %s\n    quarantine   %s\n    requeued     %s\n",
			attemptsText(s.Attempts), runsText(s.Quarantine), runsText(s.Requeued))
		fmt.Fprintf(w, "    dropped      %d\n    checksum     %s\n", s.Dropped, s.Checksum)
	}
}

func printOffset(w io.Writer, v *offsetView) {
	fmt.Fprintf(w, "consumer.offset  %s", presence(v.Present, v.Read))
	switch {
	case !v.Present:
		fmt.Fprintln(w)
		return
	case !v.Valid:
		fmt.Fprintf(w, ", ignored: %s\n", v.Error)
		return
	}
	form := "checksummed"
	if v.Legacy {
		form = "legacy (no checksum, no incarnation)"
	}
	fmt.Fprintf(w, ", valid, %s: %s\n  frontier       %d\n", form, v.Use, *v.Frontier)
	if v.Incarnation != "" {
		fmt.Fprintf(w, "  incarnation    %s\n", v.Incarnation)
	}
}

// printRecovery prints what recovery takes and why, each line after indent.
func printRecovery(w io.Writer, p *partitionReport, indent string) {
	rec := p.Recovery
	if rec.Refused != "" {
		fmt.Fprintf(w, "%sRecovery refuses: %s\n", indent, rec.Refused)
	} else {
		frontier := "none: no trusted frontier"
		if rec.Found {
			frontier = strconv.FormatInt(rec.Frontier, 10)
			if rec.Unverified {
				frontier += " (unverified: a legacy consumer.offset)"
			}
		}
		incarnation := rec.Incarnation
		if incarnation == "" {
			incarnation = "none to trust (a node draws a fresh one)"
		}
		fmt.Fprintf(w, "%sRecovery takes\n%s  frontier     %s\n%s  acked ahead  %s\n",
			indent, indent, frontier, indent, runsText(rec.AckedAhead))
		if len(rec.KeyTails) > 0 {
			fmt.Fprintf(w, "%s  key tails    %s\n", indent, keyTailsText(rec.KeyTails))
		}
		fmt.Fprintf(w, "%s  attempts     %s\n%s  quarantine   %s\n%s  requeued     %s\n%s  incarnation  %s\n",
			indent, attemptsText(rec.Attempts), indent, runsText(rec.Quarantine), indent, runsText(rec.Requeued),
			indent, incarnation)
	}
	fmt.Fprintf(w, "%sWhy\n", indent)
	for _, why := range rec.Why {
		fmt.Fprintf(w, "%s  - %s\n", indent, why)
	}
	if len(p.Ignored) == 0 {
		fmt.Fprintf(w, "%sIgnored: nothing\n", indent)
	} else {
		fmt.Fprintf(w, "%sIgnored (what it would have settled is delivered again)\n", indent)
		for _, f := range p.Ignored {
			fmt.Fprintf(w, "%s  - %s: %s\n", indent, f.File, f.Reason)
		}
	}
	if len(p.Damaged) > 0 {
		fmt.Fprintf(w, "%sDamaged (recovery does not see it: what it held is delivered again)\n", indent)
		for _, f := range p.Damaged {
			fmt.Fprintf(w, "%s  - %s: %s\n", indent, f.File, f.Reason)
		}
	}
	if len(p.Passed) > 0 {
		fmt.Fprintf(w, "%sPassed over (no loss)\n", indent)
		for _, f := range p.Passed {
			fmt.Fprintf(w, "%s  - %s: %s\n", indent, f.File, f.Reason)
		}
	}
}

func (t *tool) printVerify(p *partitionReport) {
	w := t.stdout
	fmt.Fprintf(w, "%s/%d: %s\n  directory  %s\n", topicLabel(p), p.Partition, p.Verdict, p.Dir)
	if p.Error != "" {
		fmt.Fprintf(w, "  error      %s\n", p.Error)
	}
	if p.Recovery != nil {
		printRecovery(w, p, "  ")
	}
	if p.NextStart != "" {
		fmt.Fprintf(w, "  Next start: %s.\n", p.NextStart)
	}
}
