package voters_test

import (
	"bufio"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/mesh"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the golden transcripts of testdata/*.txt with what the scenarios print")

// TestScenarios runs the scenario scripts of testdata/, in the style of etcd raft's rafttest
// and of package ownership's scenarios: each block is a command (with input lines), a line
// "----", and the transcript the command prints, up to a blank line. The decisions are Plan's;
// converge applies them as raft applies configuration changes, pass after pass, as the
// leader's Reconciler does. go test -run TestScenarios -rewrite writes the transcripts.
//
// Commands (times are since the script's start, which is planNow):
//
//	options [voters=N] [grace=D]  --raft-voters and --dead-voter-grace (default 0 and 60s)
//	config [leader=ID] ID=voter|nonvoter ...  the raft configuration, and who leads
//	peers                        input lines "ID [region=R] [alive|suspect|dead|left|unknown]
//	                             [since=D] [draining] [rejoining] [unreachable] [pending]"
//	                             (default alive since now; since=D is a time of the script,
//	                             negative before its start)
//	join ID...                   gateways started afresh: alive since now, nothing else
//	set STATUS ID...             the peers' mesh status, since now
//	forget ID...                 the mesh no longer lists the peers (its retention ran out, or
//	                             the fleet was started again without them): the leader clocks
//	                             them as its Reconciler does, from the first plan that finds
//	                             them missing; a new leader (lead, reset) starts anew
//	drain ID... | wipe ID... | caughtup ID...  marked draining; back with a new raft state
//	                             (rejoining); caught up (no longer rejoining)
//	lead ID                      another gateway leads (Self of the plans)
//	tick DURATION                the clock moves on
//	reset                        another fleet: no configuration, no peers, the start's clock
//	plan                         one plan, not applied
//	converge                     plans and applies until a plan is empty: every change, then
//	                             the passes, the fewest voters on the way, the configuration
//	                             and the voters wanted
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
	line     int
	comments []string
	cmd      string
	input    []string
	want     []string
}

func runScenario(t *testing.T, file string) {
	blocks := parseScript(t, file)
	w := &fleetWorld{t: t, peers: map[string]voters.Peer{}, now: planNow}
	var out strings.Builder
	for i, b := range blocks {
		got := w.run(b)
		if !*rewrite && !slices.Equal(got, b.want) {
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", file, b.line, b.cmd, strings.Join(got, "\n"), strings.Join(b.want, "\n"))
		}
		if i > 0 {
			out.WriteString("\n")
		}
		for _, line := range slices.Concat(b.comments, []string{b.cmd}, b.input, []string{"----"}, got) {
			out.WriteString(line + "\n")
		}
	}
	if *rewrite {
		if err := os.WriteFile(file, []byte(out.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// parseScript reads the blocks of file. Lines starting with # before a command are its
// comments, which -rewrite writes back.
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
			cur = &block{line: n, comments: comments, cmd: line}
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
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		if !inWant {
			t.Fatalf("%s:%d: a command without ----", file, cur.line)
		}
		blocks = append(blocks, *cur)
	}
	return blocks
}

// fleetWorld is a fleet as the leader's planner sees it: the raft configuration, the mesh's
// peers, the leader and the clock. Its changes are applied as raft applies them.
type fleetWorld struct {
	t      *testing.T
	cfg    raft.Configuration
	peers  map[string]voters.Peer
	leader string
	now    time.Time
	opts   voters.Options
	// missing is the leader's clocks of the servers the mesh does not list (its term's).
	missing map[string]time.Time
}

func (w *fleetWorld) run(b block) []string {
	args := strings.Fields(b.cmd)
	ids, kv := args[1:], keyValues(args[1:])
	switch args[0] {
	case "options":
		if v, ok := kv["voters"]; ok {
			n, err := strconv.Atoi(v)
			if err != nil {
				w.t.Fatal(err)
			}
			w.opts.Voters = n
		}
		w.opts.DeadVoterGrace = duration(w.t, kv["grace"])
		o := voters.WithDefaults(w.opts)
		return []string{fmt.Sprintf("voters=%d grace=%s", o.Voters, o.DeadVoterGrace)}
	case "config":
		w.cfg = raft.Configuration{}
		for _, a := range ids {
			k, v, _ := strings.Cut(a, "=")
			if k == "leader" {
				w.leader = v
				continue
			}
			if v != "voter" && v != "nonvoter" {
				w.t.Fatalf("%s: a suffrage is voter or nonvoter", a)
			}
			s := raft.Voter
			if v == "nonvoter" {
				s = raft.Nonvoter
			}
			w.cfg.Servers = append(w.cfg.Servers, raft.Server{ID: raft.ServerID(k), Address: raft.ServerAddress("a-" + k), Suffrage: s})
		}
		return []string{w.configLine()}
	case "peers":
		var set []string
		for _, in := range b.input {
			set = append(set, w.setPeer(strings.Fields(in)))
		}
		return w.peerLines(set...)
	case "join":
		for _, id := range ids {
			w.peers[id] = voters.Peer{ID: id, RaftAddress: "a-" + id, Status: mesh.StatusAlive, Since: w.now}
		}
		return w.peerLines(ids...)
	case "set":
		status := parseStatus(w.t, args[1])
		for _, id := range args[2:] {
			p := w.peers[id]
			p.ID, p.RaftAddress, p.Status, p.Since = id, "a-"+id, status, w.now
			if status == mesh.StatusAlive || status == mesh.StatusLeft {
				p.Rejoining = false
			}
			w.peers[id] = p
		}
		return w.peerLines(args[2:]...)
	case "forget":
		for _, id := range ids {
			delete(w.peers, id)
		}
		return []string{"not listed: " + strings.Join(ids, " ")}
	case "drain", "wipe", "caughtup":
		for _, id := range ids {
			p := w.peers[id]
			switch args[0] {
			case "drain":
				p.Draining = true
			case "wipe":
				p.Rejoining, p.Incarnation, p.Since = true, "new-"+id, w.now
			default:
				p.Rejoining = false
			}
			w.peers[id] = p
		}
		return w.peerLines(ids...)
	case "reset":
		*w = fleetWorld{t: w.t, peers: map[string]voters.Peer{}, now: planNow}
		return []string{"reset"}
	case "lead":
		w.leader, w.missing = args[1], nil
		return []string{w.configLine()}
	case "tick":
		w.now = w.now.Add(duration(w.t, args[1]))
		return []string{"now " + w.now.Sub(planNow).String()}
	case "plan":
		return changeLines(w.plan())
	case "converge":
		return w.converge()
	}
	w.t.Fatalf("unknown command %q", b.cmd)
	return nil
}

// setPeer sets the peer of one "peers" input line and returns its id.
func (w *fleetWorld) setPeer(f []string) string {
	p := voters.Peer{ID: f[0], RaftAddress: "a-" + f[0], Status: mesh.StatusAlive, Since: w.now}
	for _, a := range f[1:] {
		k, v, _ := strings.Cut(a, "=")
		switch k {
		case "region":
			p.Region = v
		case "since":
			p.Since = planNow.Add(duration(w.t, v))
		case "draining":
			p.Draining = true
		case "rejoining":
			p.Rejoining, p.Incarnation = true, "new-"+p.ID
		case "unreachable":
			p.Unreachable = true
		case "pending":
			p.Unreachable, p.Pending = true, true
		default:
			p.Status = parseStatus(w.t, a)
		}
	}
	w.peers[p.ID] = p
	return p.ID
}

// peerLines describes the peers ids.
func (w *fleetWorld) peerLines(ids ...string) []string {
	var out []string
	for _, id := range ids {
		p := w.peers[id]
		line := fmt.Sprintf("%s region=%q %s since %s", id, p.Region, p.Status, p.Since.Sub(planNow))
		for _, flag := range []struct {
			on   bool
			name string
		}{{p.Draining, "draining"}, {p.Rejoining, "rejoining"}, {p.Unreachable, "unreachable"}, {p.Pending, "pending"}} {
			if flag.on {
				line += " " + flag.name
			}
		}
		out = append(out, line)
	}
	return out
}

// configLine is "leader ID: ID=voter ID=nonvoter ...", by id.
func (w *fleetWorld) configLine() string {
	servers := slices.Clone(w.cfg.Servers)
	slices.SortFunc(servers, func(a, b raft.Server) int { return strings.Compare(string(a.ID), string(b.ID)) })
	line := "leader " + w.leader + ":"
	for _, s := range servers {
		line += fmt.Sprintf(" %s=%s", s.ID, map[bool]string{true: "voter", false: "nonvoter"}[s.Suffrage == raft.Voter])
	}
	return line
}

func (w *fleetWorld) plan() []voters.Change {
	o := w.opts
	o.Self = w.leader
	return voters.Plan(w.cfg, w.view(), w.now, o)
}

// view is the peers as the leader's Reconciler hands them to Plan: with the servers of the
// configuration that the mesh does not list, clocked by w.missing.
func (w *fleetWorld) view() []voters.Peer {
	if w.missing == nil {
		w.missing = make(map[string]time.Time)
	}
	return voters.UnlistedPeers(w.missing, w.cfg, slices.Collect(maps.Values(w.peers)), w.now)
}

// changeLines describes a plan, one change a line.
func changeLines(plan []voters.Change) []string {
	if len(plan) == 0 {
		return []string{"no change"}
	}
	var out []string
	for _, c := range plan {
		line := c.Kind.String() + " " + c.ID
		if c.Kind == voters.ChangeUpdateAddress {
			line += " " + c.Address
		}
		out = append(out, line+": "+c.Reason)
	}
	return out
}

// voters returns the voters of the configuration, sorted.
func (w *fleetWorld) voters() []string {
	var out []string
	for _, s := range w.cfg.Servers {
		if s.Suffrage == raft.Voter {
			out = append(out, string(s.ID))
		}
	}
	slices.Sort(out)
	return out
}

// converge plans and applies as the leader's passes do until a plan is empty, and describes
// what it did: every change, then the passes that changed something, the fewest voters any
// configuration on the way had, the configuration and the voters wanted. The leader must end
// a voter.
func (w *fleetWorld) converge() []string {
	w.t.Helper()
	var out []string
	fewest := len(w.voters())
	for passes := range 64 {
		plan := w.plan()
		if len(plan) == 0 {
			o := w.opts
			o.Self = w.leader
			_, _, account := voters.Planned(w.cfg, w.view(), w.now, o)
			if !slices.Contains(w.voters(), w.leader) {
				w.t.Errorf("leader %q is not a voter: %s", w.leader, w.configLine())
			}
			return append(out, fmt.Sprintf("passes: %d, fewest voters on the way: %d", passes, fewest), w.configLine(), account)
		}
		for _, line := range changeLines(plan) {
			out = append(out, fmt.Sprintf("pass %d: %s", passes+1, line))
		}
		for _, c := range plan {
			if c.Kind == voters.ChangeTransferLeadership {
				w.leader = c.ID
				continue
			}
			cfg, err := applyChange(w.cfg, c)
			if err != nil {
				w.t.Fatal(err)
			}
			w.cfg = cfg
			fewest = min(fewest, len(w.voters()))
		}
	}
	w.t.Fatalf("no fixed point: %s", w.configLine())
	return nil
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
