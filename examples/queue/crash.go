package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"narad.dev/consume/examples/internal/filequeue"
	"narad.dev/consume/router"
)

// The crash demo. The parent starts this program again as a child (the hidden
// -crash-child flag). The child produces every message, then consumes them with workers,
// and keeps a journal of its acks. The parent kills it with SIGKILL once it has made
// cfg.killAfter acks, restarts a consumer over the same state directory, and checks the
// journal against what the restarted node delivers.
//
// What the library promises (router's package documentation): acks reach the page cache
// within one committer tick (100 ms), which a crash of the process does not lose; so after
// a process crash about the last tick of acks is delivered again, and nothing acked before
// that is.

// journalName is the child's journal, in the state directory.
const journalName = "acks.journal"

// tickWindow is the committer tick the library documents: the acks of about this long
// before a process crash are delivered again.
const tickWindow = 100 * time.Millisecond

// A journal is the child's record of its acks, a text file the parent reads after the kill.
// Before a batch of acks goes to the node, a line "intent <partition> <offset>" per message;
// after, "acked <partition> <offset> <unix nanoseconds>" or "refused <partition> <offset>"
// per answer, then an fsync, then a line "acked <total>" on standard output for the parent.
// A kill between the two leaves intents without answers: acks the node may or may not have
// taken. Every line is written whole by one write, so a kill cannot leave half of one.
type journal struct {
	mu        sync.Mutex
	f         *os.File
	out       io.Writer
	buf       []byte
	confirmed int
}

// intend records the acks about to be made. A nil journal records nothing.
func (j *journal) intend(msgs []*router.Message) error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.buf = j.buf[:0]
	for _, m := range msgs {
		j.buf = fmt.Appendf(j.buf, "intent %d %d\n", m.Partition, m.Offset)
	}
	_, err := j.f.Write(j.buf)
	return err
}

// settled records the node's answers to the acks intend announced, made durable, and tells
// the parent how many acks are confirmed so far.
func (j *journal) settled(msgs []*router.Message, errs []error, at time.Time) error {
	if j == nil {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	j.buf = j.buf[:0]
	for i, m := range msgs {
		if errs[i] == nil {
			j.buf = fmt.Appendf(j.buf, "acked %d %d %d\n", m.Partition, m.Offset, at.UnixNano())
			j.confirmed++
		} else {
			j.buf = fmt.Appendf(j.buf, "refused %d %d\n", m.Partition, m.Offset)
		}
	}
	if _, err := j.f.Write(j.buf); err != nil {
		return err
	}
	if err := j.f.Sync(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(j.out, "acked %d\n", j.confirmed)
	return err
}

func (j *journal) say(line string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	fmt.Fprintln(j.out, line)
}

// runChild is the crash demo's child: produce everything, consume with a journal, and wait
// to be killed. It stops by itself only if its standard input closes (the parent is gone).
func runChild(ctx context.Context, cfg config, out io.Writer, stdin io.Reader) error {
	if cfg.dir == "" {
		return errors.New("-crash-child needs -dir")
	}
	q, err := openQueue(cfg.dir, cfg)
	if err != nil {
		return err
	}
	defer q.Close() // only when the parent went away without killing us
	if err := q.RequireEmpty("messages"); err != nil {
		return err
	}
	st := newStats(cfg.messages)
	if err := produce(ctx, q.Store, cfg.messages, cfg.partitions, 0, st); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(cfg.dir, journalName), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	j := &journal{f: f, out: out}
	j.say(fmt.Sprintf("produced %d", cfg.messages))

	ctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, cfg.workers)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	for i := range cfg.workers {
		w := &worker{node: q.Node, rng: rand.New(rand.NewPCG(cfg.seed, uint64(i))), visibility: cfg.visibility, stats: st, journal: j}
		wg.Go(func() {
			if err := w.run(ctx); err != nil {
				errc <- err
			}
		})
	}
	parentGone := make(chan struct{})
	go func() {
		io.Copy(io.Discard, stdin)
		close(parentGone)
	}()
	select {
	case <-st.done:
		j.say("done") // every message acked before the kill came: wait for it
	case err := <-errc:
		return err
	case <-parentGone:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-errc:
		return err
	case <-parentGone:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// crashReport is what the crash demo found.
type crashReport struct {
	produced  int64
	killedAt  time.Time
	confirmed int // acks the journal confirms the child made before the kill
	uncertain int // acks the child was making when the kill landed: taken or not, both fine
	// After the restart.
	delivered      int           // records the restarted node delivered
	again          int           // of them, records the child's acks had confirmed
	againOldest    time.Duration // the longest before the kill one of those was acked
	lastTick       int           // acks the child confirmed in its last tickWindow
	lost           []position    // records acked neither before nor after: must be none
	afterGraceful  int           // delivered after a graceful close and a second restart
	uncertainAgain int           // uncertain acks delivered again after the restart
}

// runCrash runs the crash demo: child, kill, restart, check.
func runCrash(ctx context.Context, cfg config, out io.Writer) (crashReport, error) {
	var rep crashReport
	dir, cleanup, err := filequeue.StateDir(cfg.dir, "queue-crash-")
	if err != nil {
		return rep, err
	}
	defer cleanup()
	killAfter := cfg.killAfter
	if killAfter == 0 {
		killAfter = cfg.messages / 2
	}
	exe := cfg.exe
	if exe == "" {
		if exe, err = os.Executable(); err != nil {
			return rep, err
		}
	}
	fmt.Fprintf(out, "crash demo: a child process produces %d messages and consumes them; it is killed after %d acks\n", cfg.messages, killAfter)
	fmt.Fprintf(out, "state: %s (%s)\n\n", dir, filequeue.StateNote(cfg.dir))

	// 1. The child, killed hard in the middle.
	if rep.killedAt, err = runAndKill(ctx, exe, dir, cfg, killAfter, out); err != nil {
		return rep, err
	}
	j, err := readJournal(filepath.Join(dir, journalName))
	if err != nil {
		return rep, err
	}
	rep.confirmed = len(j.confirmed)
	for pos := range j.pending {
		if _, ok := j.confirmed[pos]; !ok {
			rep.uncertain++
		}
	}
	for _, at := range j.confirmed {
		if rep.killedAt.Sub(at) <= tickWindow {
			rep.lastTick++
		}
	}
	fmt.Fprintf(out, "journal: %d acks confirmed before the kill, %d in flight when it landed\n", rep.confirmed, rep.uncertain)

	// 2. A consumer restarted over the same directory takes everything that is left.
	q, err := openQueue(dir, cfg)
	if err != nil {
		return rep, err
	}
	defer q.Close()
	ackedAfter := map[position]bool{}
	rep.delivered, err = drain(ctx, q.Node, func(m *router.Message) {
		pos := position{m.Partition, m.Offset}
		ackedAfter[pos] = true
		if at, ok := j.confirmed[pos]; ok {
			rep.again++
			rep.againOldest = max(rep.againOldest, rep.killedAt.Sub(at))
		} else if j.pending[pos] {
			rep.uncertainAgain++
		}
	})
	if err != nil {
		return rep, err
	}

	// 3. Every record in the log was acked before the crash or after it.
	local, _, _ := q.Store.Partitions(topic)
	for _, p := range local {
		l, err := q.Store.Log(topic, p)
		if err != nil {
			return rep, err
		}
		rep.produced += l.HighWatermark()
		for off := l.Oldest(); off < l.HighWatermark(); off++ {
			pos := position{p, off}
			if _, ok := j.confirmed[pos]; !ok && !j.pending[pos] && !ackedAfter[pos] {
				rep.lost = append(rep.lost, pos)
			}
		}
	}

	// 4. A graceful close persists every ack: a second restart delivers nothing.
	if err := q.Close(); err != nil {
		return rep, err
	}
	q2, err := openQueue(dir, cfg)
	if err != nil {
		return rep, err
	}
	defer q2.Close()
	if rep.afterGraceful, err = drain(ctx, q2.Node, func(*router.Message) {}); err != nil {
		return rep, err
	}
	rep.print(out)
	if len(rep.lost) > 0 || rep.afterGraceful > 0 {
		return rep, errors.New("the queue broke its promise")
	}
	return rep, nil
}

// runAndKill starts the child, kills it with SIGKILL once it reports killAfter acks, and
// returns when the kill happened.
func runAndKill(ctx context.Context, exe, dir string, cfg config, killAfter int, out io.Writer) (time.Time, error) {
	cmd := exec.CommandContext(ctx, exe, "-crash-child", "-dir", dir,
		"-messages", strconv.Itoa(cfg.messages), "-partitions", strconv.Itoa(cfg.partitions),
		"-workers", strconv.Itoa(cfg.workers), "-visibility", cfg.visibility.String(),
		"-acked-ahead", strconv.Itoa(cfg.ackedAhead),
		"-seed", strconv.FormatUint(cfg.seed, 10))
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return time.Time{}, err
	}
	// Never written: the child's standard input closes if this process goes away.
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return time.Time{}, err
	}
	defer stdin.Close()
	if err := cmd.Start(); err != nil {
		return time.Time{}, err
	}
	fmt.Fprintf(out, "child %d: started\n", cmd.Process.Pid)

	var killedAt time.Time
	acks := 0
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		line := lines.Text()
		if strings.HasPrefix(line, "produced ") {
			fmt.Fprintf(out, "child %d: %s\n", cmd.Process.Pid, line)
		}
		if n, ok := strings.CutPrefix(line, "acked "); ok {
			acks, _ = strconv.Atoi(n)
		}
		if acks >= killAfter || line == "done" {
			killedAt = time.Now()
			if err := cmd.Process.Kill(); err != nil { // SIGKILL: no defer, no Close, nothing
				return killedAt, err
			}
			fmt.Fprintf(out, "child %d: killed with SIGKILL once it reported %d acks\n", cmd.Process.Pid, acks)
			break
		}
	}
	io.Copy(io.Discard, stdout) // what it wrote before it died
	err = cmd.Wait()
	if killedAt.IsZero() {
		return killedAt, fmt.Errorf("the child stopped before it was killed: %v", err)
	}
	return killedAt, nil
}

// drain consumes and acks until the topic has nothing left to deliver, calling seen for
// each record, and returns how many it took. It consumes without waiting, and holds no lease
// between consumes, so an empty consume means every record is settled.
func drain(ctx context.Context, node *router.Node, seen func(*router.Message)) (int, error) {
	n := 0
	for {
		msgs, err := node.Consume(ctx, topic, router.ConsumeOptions{Max: 64})
		if err != nil {
			return n, err
		}
		if len(msgs) == 0 {
			return n, nil
		}
		handles := make([]router.Handle, len(msgs))
		for i := range msgs {
			seen(&msgs[i])
			handles[i] = msgs[i].Receipt
		}
		for i, err := range node.AckBatch(ctx, topic, handles) {
			if err != nil {
				return n, fmt.Errorf("ack %s: %w", handles[i], err)
			}
		}
		n += len(msgs)
	}
}

// journalState is what a journal says.
type journalState struct {
	confirmed map[position]time.Time // acked, and when
	pending   map[position]bool      // an intent with no answer after it
}

func readJournal(path string) (journalState, error) {
	j := journalState{confirmed: map[position]time.Time{}, pending: map[position]bool{}}
	b, err := os.ReadFile(path)
	if err != nil {
		return j, err
	}
	text := string(b)
	if i := strings.LastIndexByte(text, '\n'); i >= 0 {
		text = text[:i] // a last line without its newline was cut short: ignore it
	} else {
		text = ""
	}
	for line := range strings.SplitSeq(text, "\n") {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		p, err1 := strconv.ParseInt(f[1], 10, 32)
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		pos := position{int32(p), off}
		switch f[0] {
		case "intent":
			j.pending[pos] = true
		case "refused":
			delete(j.pending, pos)
		case "acked":
			delete(j.pending, pos)
			if len(f) == 4 {
				if nanos, err := strconv.ParseInt(f[3], 10, 64); err == nil {
					j.confirmed[pos] = time.Unix(0, nanos)
				}
			}
		}
	}
	return j, nil
}

func (rep crashReport) print(out io.Writer) {
	w := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }
	w("restart: a new node over the same directory delivered %d records", rep.delivered)
	w("  %6d never acked before the crash", rep.delivered-rep.again-rep.uncertainAgain)
	w("  %6d whose ack was in flight at the kill (the node had not taken it, or not persisted it)", rep.uncertainAgain)
	w("  %6d acked before the crash: delivered again", rep.again)
	if len(rep.lost) == 0 {
		w("nothing lost: all %d records were acked, before the crash or after it", rep.produced)
	} else {
		w("LOST: %d records acked neither before the crash nor after it, first %v", len(rep.lost), rep.lost[0])
	}
	if rep.again > 0 {
		w("window: the %d acked records delivered again had been acked at most %v before the kill;", rep.again, rep.againOldest.Round(time.Millisecond))
	} else {
		w("window: no acked record was delivered again;")
	}
	w("  the library documents about one committer tick (%v) of acks delivered again after a", tickWindow)
	w("  process crash, and the child confirmed %d acks in its last %v", rep.lastTick, tickWindow)
	w("graceful: after Close and another restart, %d records delivered again (Close persists every ack)", rep.afterGraceful)
}
