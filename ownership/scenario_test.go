package ownership

import (
	"bufio"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/worker"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden transcripts of testdata/*.txt with what the scenarios print")

// TestScenarios runs the scenario scripts of testdata/, in the style of etcd raft's rafttest:
// each block is a command (with input lines), a line "----", and the transcript the command
// prints, up to a blank line. The decisions are this package's pure functions; their moves are
// applied as fenced fsm.Reassign entries on a real FSM, one raft index each, so that epochs and
// fences behave as in a cluster. go test -run TestScenarios -rewrite writes the transcripts.
//
// Commands:
//
//	peers                        input lines "ID [region=R] [started=D] [alive|suspect|dead|left|unknown] [draining]"
//	workers                      input lines "NAME owner=O [region=R] [hostlocal]": registered in order
//	set ID STATUS | drain ID | undrain ID     change a peer (its Since becomes now); a drain
//	                             mark names the peer's process (its start time)
//	restart ID                   the peer's process starts again: alive, started now
//	raft [leader=ID] ID=voter|nonvoter|out ...  the raft configuration the drain decisions read
//	finish                       the leader's pass over the drain marks: each one's state, and
//	                             the marks it clears (Finished)
//	tick DURATION                the clock moves on
//	save                         keep the records as they are now: a view that goes stale
//	failover grace=D [view=saved]
//	handoff [view=saved]
//	transfer NAME to=ID [view=saved]
//	rebalance [settle=D] [dry-run] [view=saved]
//	owners                       every worker's owner@epoch and the counts per peer
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios in testdata/: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) { runScenario(t, file) })
	}
}

// block is one command of a script and its transcript.
type block struct {
	line  int
	cmd   string
	input []string
	want  []string
}

func runScenario(t *testing.T, file string) {
	blocks := parseScript(t, file)
	w := newWorld(t)
	var out strings.Builder
	for i, b := range blocks {
		got := w.run(b)
		if !*rewrite && !slices.Equal(got, b.want) {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", file, b.line, b.cmd, strings.Join(got, "\n"), strings.Join(b.want, "\n"))
		}
		if i > 0 {
			out.WriteString("\n")
		}
		for _, c := range b.comments() {
			out.WriteString(c + "\n")
		}
		out.WriteString(strings.Join(b.command(), " ") + "\n")
		for _, in := range b.input {
			out.WriteString(in + "\n")
		}
		out.WriteString("----\n")
		for _, g := range got {
			out.WriteString(g + "\n")
		}
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// parseScript reads the blocks of file. Lines starting with # before a command are comments,
// kept in the block's cmd field behind a newline so that -rewrite writes them back.
func parseScript(t *testing.T, file string) []block {
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []block
	var cur *block
	var comments []string
	inWant := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && line == "":
		case cur == nil && strings.HasPrefix(line, "#"):
			comments = append(comments, line)
		case cur == nil:
			cur = &block{line: n, cmd: strings.Join(append(comments, line), "\n")}
			comments = nil
		case !inWant && line == "----":
			inWant = true
		case !inWant:
			cur.input = append(cur.input, line)
		case line == "":
			blocks, cur, inWant = append(blocks, *cur), nil, false
		default:
			cur.want = append(cur.want, line)
		}
	}
	if cur != nil {
		if !inWant {
			t.Fatalf("%s:%d: a command without ----", file, cur.line)
		}
		blocks = append(blocks, *cur)
	}
	return blocks
}

// comments returns the block's comment lines; command returns its command line.
func (b block) comments() []string {
	lines := strings.Split(b.cmd, "\n")
	return lines[:len(lines)-1]
}

func (b block) command() []string {
	lines := strings.Split(b.cmd, "\n")
	return strings.Fields(lines[len(lines)-1])
}

// world is the state a script drives: the mesh's peers, a clock, and a real FSM.
type world struct {
	t      *testing.T
	now    time.Time
	peers  map[string]Peer
	f      *fsm.FSM
	index  uint64
	names  map[worker.ID]string
	ids    map[string]worker.ID
	saved  []Worker
	nextIP int
	// marks are the drain marks, by peer; raft is the configuration the drain decisions read.
	marks map[string]fsm.DrainingPeer
	raft  RaftView
}

func newWorld(t *testing.T) *world {
	return &world{t: t, now: t0, peers: make(map[string]Peer), f: fsm.New(slog.New(slog.DiscardHandler)),
		names: make(map[worker.ID]string), ids: make(map[string]worker.ID), marks: make(map[string]fsm.DrainingPeer),
		raft: RaftView{Servers: make(map[string]string)}}
}

func (w *world) run(b block) []string {
	args := b.command()
	kv := keyValues(args[1:])
	switch args[0] {
	case "peers":
		for _, in := range b.input {
			w.setPeer(strings.Fields(in))
		}
		return w.peerLines()
	case "workers":
		for _, in := range b.input {
			w.register(strings.Fields(in))
		}
		return w.ownerLines()
	case "set", "drain", "undrain":
		p := w.peers[args[1]]
		switch args[0] {
		case "set":
			p.Status, p.Since = parseStatus(w.t, args[2]), w.now
		default:
			w.mark(p.ID, args[0] == "drain")
			p.Draining = args[0] == "drain"
		}
		w.peers[args[1]] = p
		return w.peerLines()
	case "restart":
		p := w.peers[args[1]]
		p.Status, p.Since, p.Started = mesh.StatusAlive, w.now, w.now
		w.peers[args[1]] = p
		return w.peerLines()
	case "raft":
		return w.setRaft(args[1:])
	case "finish":
		return w.finish()
	case "tick":
		d, err := time.ParseDuration(args[1])
		if err != nil {
			w.t.Fatal(err)
		}
		w.now = w.now.Add(d)
		return []string{"now " + w.now.Sub(t0).String()}
	case "save":
		w.saved = w.workers()
		return []string{fmt.Sprintf("saved %d workers", len(w.saved))}
	case "owners":
		return w.ownerLines()
	case "failover":
		return w.apply(PlanFailover(w.view(kv), w.peerList(), w.now, duration(w.t, kv["grace"])), nil)
	case "handoff":
		moves, stuck := PlanHandoff(w.view(kv), w.peerList())
		return w.apply(moves, stuck)
	case "transfer":
		return w.transfer(args[1], kv)
	case "rebalance":
		moves := PlanRebalance(w.view(kv), w.peerList(), w.now, duration(w.t, kv["settle"]))
		if _, dry := kv["dry-run"]; dry {
			return append(w.moveLines(moves), fmt.Sprintf("plan: %d moves", len(moves)))
		}
		return w.apply(moves, nil)
	}
	w.t.Fatalf("line %d: unknown command %q", b.line, args[0])
	return nil
}

func (w *world) transfer(name string, kv map[string]string) []string {
	id := w.ids[name]
	var cur Worker
	for _, x := range w.view(kv) {
		if x.ID == id {
			cur = x
		}
	}
	m, ok, err := PlanTransfer(cur, kv["to"], w.peerList())
	switch {
	case err != nil:
		return []string{"refused: " + err.Error()}
	case !ok:
		return []string{"unchanged: " + kv["to"] + " owns " + name}
	}
	return w.apply([]Move{m}, nil)
}

// apply applies moves as one fenced Reassign entry and prints what it did.
func (w *world) apply(moves []Move, stuck []worker.ID) []string {
	out := w.moveLines(moves)
	var names []string
	for _, id := range stuck {
		names = append(names, w.names[id])
	}
	if len(names) > 0 {
		slices.Sort(names)
		out = append(out, "stuck: "+strings.Join(names, " "))
	}
	if len(moves) == 0 {
		return append(out, "no moves")
	}
	items := make([]fsm.ReassignItem, len(moves))
	for i, m := range moves {
		items[i] = fsm.ReassignItem{ID: m.ID, From: fsm.Fence{Owner: m.From, Epoch: m.Epoch}, To: m.To}
	}
	res := w.applyCmd(fsm.Reassign{Items: items})
	for _, s := range res.Reassign.Skipped {
		out = append(out, "skipped "+w.names[s.ID]+": "+s.Reason)
	}
	return append(out, fmt.Sprintf("applied at index %d: %d moved", res.Index, len(res.Reassign.Moved)), w.countLine())
}

// moveLines prints moves by worker name (the decisions sort them by id, a hash).
func (w *world) moveLines(moves []Move) []string {
	var out []string
	for _, m := range moves {
		out = append(out, fmt.Sprintf("%s: %s@%d -> %s", w.names[m.ID], m.From, m.Epoch, m.To))
	}
	slices.Sort(out)
	return out
}

func (w *world) applyCmd(c fsm.Command) fsm.Result {
	data, err := fsm.Encode(c)
	if err != nil {
		w.t.Fatal(err)
	}
	w.index++
	res := w.f.Apply(&raft.Log{Index: w.index, Data: data}).(fsm.Result)
	res.Index = w.index
	return res
}

func (w *world) setPeer(f []string) {
	p := Peer{ID: f[0], Status: mesh.StatusAlive, Since: w.now}
	for _, a := range f[1:] {
		switch {
		case strings.HasPrefix(a, "region="):
			p.Region = strings.TrimPrefix(a, "region=")
		case strings.HasPrefix(a, "started="):
			p.Started = t0.Add(duration(w.t, strings.TrimPrefix(a, "started=")))
		case a == "draining":
			p.Draining = true
		default:
			p.Status = parseStatus(w.t, a)
		}
	}
	w.peers[p.ID] = p
	w.mark(p.ID, p.Draining)
}

// mark sets (naming the peer's process, as Operator.Drain does) or clears the drain mark of id.
// A mark that exists keeps its time.
func (w *world) mark(id string, on bool) {
	_, ok := w.marks[id]
	switch {
	case on && !ok:
		w.marks[id] = fsm.DrainingPeer{ID: id, Since: w.now, Started: w.peers[id].Started}
	case !on:
		delete(w.marks, id)
	}
}

// setRaft applies "leader=ID" and "ID=voter|nonvoter|out" to the raft view and prints it.
func (w *world) setRaft(args []string) []string {
	for k, v := range keyValues(args) {
		switch {
		case k == "leader":
			w.raft.Leader = v
		case v == "out":
			delete(w.raft.Servers, k)
		default:
			w.raft.Servers[k] = v
		}
	}
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(w.raft.Servers)) {
		parts = append(parts, id+"="+w.raft.Servers[id])
	}
	return []string{"leader " + w.raft.Leader + ": " + strings.Join(parts, " ")}
}

// finish is the leader's pass over the drain marks: it prints each one's state and clears those
// Finished returns.
func (w *world) finish() []string {
	marks := slices.Collect(maps.Values(w.marks))
	ids := slices.Sorted(maps.Keys(w.marks))
	var out []string
	for _, s := range DrainStates(ids, marks, w.workers(), w.peerList(), w.raft) {
		line := fmt.Sprintf("%s %s owned=%d stuck=%d raft=%q", s.Peer, s.Status, s.Owned, s.Stuck, s.Raft)
		for _, f := range []struct {
			on   bool
			name string
		}{{s.Leader, "leader"}, {s.Restarted, "restarted"}, {s.Done, "done"}} {
			if f.on {
				line += " " + f.name
			}
		}
		out = append(out, line)
	}
	var cleared []string
	for _, s := range Finished(marks, w.workers(), w.peerList(), w.raft) {
		cleared = append(cleared, s.Peer)
		w.mark(s.Peer, false)
		p := w.peers[s.Peer]
		p.Draining = false
		w.peers[s.Peer] = p
	}
	if len(cleared) == 0 {
		return append(out, "cleared: none")
	}
	return append(out, "cleared: "+strings.Join(cleared, " "))
}

func (w *world) register(f []string) {
	kv := keyValues(f[1:])
	w.nextIP++
	spec := worker.Spec{URL: fmt.Sprintf("http://127.0.0.%d:8000", w.nextIP), Region: kv["region"]}
	if _, ok := kv["hostlocal"]; ok {
		spec = worker.Spec{URL: fmt.Sprintf("ipc:///tmp/engine-%d", w.nextIP), ConnectionMode: "zmq", Region: kv["region"]}
	}
	if err := spec.Normalize(); err != nil {
		w.t.Fatal(err)
	}
	w.names[spec.ID()], w.ids[f[0]] = f[0], spec.ID()
	if res := w.applyCmd(fsm.Register{Spec: spec, Owner: kv["owner"]}); res.Err != nil {
		w.t.Fatal(res.Err)
	}
}

// workers are the records as the decisions read them.
func (w *world) workers() []Worker { return workersOf(w.f.Workers()) }

// view is the records a decision plans on: the saved ones with view=saved, else the current.
func (w *world) view(kv map[string]string) []Worker {
	if kv["view"] == "saved" {
		return w.saved
	}
	return w.workers()
}

func (w *world) peerList() []Peer { return slices.Collect(maps.Values(w.peers)) }

func (w *world) peerLines() []string {
	counts := Counts(w.workers())
	var out []string
	for _, id := range slices.Sorted(maps.Keys(w.peers)) {
		p := w.peers[id]
		line := fmt.Sprintf("%s region=%q %s since %s owns %d", id, p.Region, p.Status, p.Since.Sub(t0), counts[id])
		if !p.Started.IsZero() {
			line += " started " + p.Started.Sub(t0).String()
		}
		if p.Draining {
			line += " draining"
		}
		out = append(out, line)
	}
	return out
}

func (w *world) ownerLines() []string {
	var out []string
	ws := w.workers()
	slices.SortFunc(ws, func(a, b Worker) int { return strings.Compare(w.names[a.ID], w.names[b.ID]) })
	for _, x := range ws {
		out = append(out, fmt.Sprintf("%s: %s@%d", w.names[x.ID], x.Owner, x.Epoch))
	}
	return append(out, w.countLine())
}

func (w *world) countLine() string {
	counts := Counts(w.workers())
	var parts []string
	for _, id := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, id+"="+strconv.Itoa(counts[id]))
	}
	return "owners: " + strings.Join(parts, " ")
}

func keyValues(args []string) map[string]string {
	kv := make(map[string]string)
	for _, a := range args {
		k, v, _ := strings.Cut(a, "=")
		kv[k] = v
	}
	return kv
}

func duration(t *testing.T, s string) time.Duration {
	if s == "" {
		return 0
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func parseStatus(t *testing.T, s string) mesh.Status {
	for _, st := range []mesh.Status{mesh.StatusAlive, mesh.StatusSuspect, mesh.StatusDead, mesh.StatusLeft, mesh.StatusUnknown} {
		if st.String() == s {
			return st
		}
	}
	t.Fatalf("unknown status %q", s)
	return 0
}
