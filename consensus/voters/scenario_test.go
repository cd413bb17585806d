package voters

import (
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/mesh"
)

// fleetWorld is a fleet as the leader's planner sees it: the raft configuration, the mesh's
// peers, the leader and the clock. Its changes are applied as raft applies them.
type fleetWorld struct {
	t      *testing.T
	cfg    raft.Configuration
	peers  map[string]Peer
	leader string
	now    time.Time
	opts   Options
}

func newFleetWorld(t *testing.T, cfg raft.Configuration, leader string, ids ...string) *fleetWorld {
	w := &fleetWorld{t: t, cfg: cfg, peers: map[string]Peer{}, leader: leader, now: planNow}
	for _, id := range ids {
		w.peers[id] = Peer{ID: id, RaftAddress: "a-" + id, Status: mesh.StatusAlive, Since: w.now}
	}
	return w
}

// set gives the peers ids status from now on.
func (w *fleetWorld) set(status mesh.Status, ids ...string) {
	for _, id := range ids {
		p := w.peers[id]
		p.ID, p.RaftAddress, p.Status, p.Since = id, "a-"+id, status, w.now
		if status == mesh.StatusAlive || status == mesh.StatusLeft {
			p.Rejoining = false
		}
		w.peers[id] = p
	}
}

// join brings ids in as gateways started afresh: alive, not draining.
func (w *fleetWorld) join(ids ...string) {
	for _, id := range ids {
		w.peers[id] = Peer{ID: id, RaftAddress: "a-" + id, Status: mesh.StatusAlive, Since: w.now}
	}
}

func (w *fleetWorld) drain(ids ...string) {
	for _, id := range ids {
		p := w.peers[id]
		p.Draining = true
		w.peers[id] = p
	}
}

func (w *fleetWorld) wipe(id string) {
	p := w.peers[id]
	p.Rejoining, p.Incarnation, p.Since = true, "new-"+id, w.now
	w.peers[id] = p
}

func (w *fleetWorld) caughtUp(id string) {
	p := w.peers[id]
	p.Rejoining = false
	w.peers[id] = p
}

func (w *fleetWorld) tick(d time.Duration) { w.now = w.now.Add(d) }

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

// converge plans and applies as the leader's passes do until a plan is empty, and returns the
// fewest voters any configuration on the way had.
func (w *fleetWorld) converge() (fewest int) {
	w.t.Helper()
	fewest = len(w.voters())
	for range 64 {
		o := w.opts
		o.Self = w.leader
		plan := Plan(w.cfg, slices.Collect(maps.Values(w.peers)), w.now, o)
		if len(plan) == 0 {
			return fewest
		}
		for _, c := range plan {
			if c.Kind == ChangeTransferLeadership {
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
	w.t.Fatalf("no fixed point: %v", suffrages(w.cfg))
	return fewest
}

// fleetStep is one event of a scenario, and what the leader's passes make of it.
type fleetStep struct {
	what   string
	do     func(w *fleetWorld)
	voters []string // the voters once the passes converged
	fewest int      // the voter count never drops below this on the way
}

// TestAutoVoterScenarios follows the automatic voter count (Voters 0) through the changes a
// fleet goes through, each step converged by the leader's passes: the voters at the end of
// each step, and the fewest voters on the way (the count never dips through a kill, a pause, a
// partition or a wiped disk; only drains and leaves lower it).
func TestAutoVoterScenarios(t *testing.T) {
	grace := DefaultDeadVoterGrace
	n15 := []string{"n1", "n2", "n3", "n4", "n5"}
	startFive := func(t *testing.T) *fleetWorld { return newFleetWorld(t, five(), "n1", n15...) }
	tests := []struct {
		name  string
		start func(t *testing.T) *fleetWorld
		steps []fleetStep
	}{
		{name: "grow 1 -> 3 -> 5", start: func(t *testing.T) *fleetWorld { return newFleetWorld(t, conf(voter("n1")), "n1", "n1") },
			steps: []fleetStep{
				{"n2 joins: two gateways keep one voter", func(w *fleetWorld) { w.join("n2") }, []string{"n1"}, 1},
				{"n3 joins: three voters", func(w *fleetWorld) { w.join("n3") }, []string{"n1", "n2", "n3"}, 1},
				{"n4 joins: still three", func(w *fleetWorld) { w.join("n4") }, []string{"n1", "n2", "n3"}, 3},
				{"n5 joins: five", func(w *fleetWorld) { w.join("n5") }, n15, 3},
				{"n6 and n7 join: still five", func(w *fleetWorld) { w.join("n6", "n7") }, n15, 5},
			}},
		{name: "a drain of one of five", start: startFive,
			steps: []fleetStep{
				{"n5 drains: its seat goes", func(w *fleetWorld) { w.drain("n5") }, []string{"n1", "n2", "n3", "n4"}, 4},
				{"it leaves the mesh: it counts for the grace", func(w *fleetWorld) { w.set(mesh.StatusLeft, "n5") }, []string{"n1", "n2", "n3", "n4"}, 4},
				{"gone past the grace: four gateways keep three voters", func(w *fleetWorld) { w.tick(grace + time.Second) }, []string{"n1", "n2", "n3"}, 3},
				{"a gateway started in its place: five again", func(w *fleetWorld) { w.join("n5") }, n15, 3},
			}},
		{name: "a drained gateway restarted at once", start: startFive,
			steps: []fleetStep{
				{"n5 drains and leaves", func(w *fleetWorld) { w.drain("n5"); w.converge(); w.set(mesh.StatusLeft, "n5") }, []string{"n1", "n2", "n3", "n4"}, 4},
				{"it is started again: five, never three", func(w *fleetWorld) { w.tick(time.Second); w.join("n5") }, n15, 4},
			}},
		{name: "a kill of two of five", start: startFive,
			steps: []fleetStep{
				{"n4 and n5 die: raft's quorum carries it", func(w *fleetWorld) { w.set(mesh.StatusDead, "n4", "n5") }, n15, 5},
				{"within the grace: nothing", func(w *fleetWorld) { w.tick(grace) }, n15, 5},
				{"past the grace: three live voters tolerate a fault, five with two dead do not",
					func(w *fleetWorld) { w.tick(time.Second) }, []string{"n1", "n2", "n3"}, 3},
				{"they come back: five again", func(w *fleetWorld) { w.join("n4", "n5") }, n15, 3},
			}},
		{name: "a kill of one of three past the grace", start: func(t *testing.T) *fleetWorld {
			return newFleetWorld(t, conf(voter("n1"), voter("n2"), voter("n3")), "n1", "n1", "n2", "n3")
		},
			steps: []fleetStep{
				{"n3 dies for long: its seat is kept, two of two would tolerate no more",
					func(w *fleetWorld) { w.set(mesh.StatusDead, "n3"); w.tick(2 * grace) }, []string{"n1", "n2", "n3"}, 3},
				{"a fourth gateway joins: it takes the seat", func(w *fleetWorld) { w.join("n4") }, []string{"n1", "n2", "n4"}, 2},
			}},
		{name: "a partition", start: startFive,
			steps: []fleetStep{
				{"n4 and n5 cut off, suspect then dead to the majority", func(w *fleetWorld) {
					w.set(mesh.StatusSuspect, "n4", "n5")
					w.tick(5 * time.Second)
					w.set(mesh.StatusDead, "n4", "n5")
					w.tick(grace / 2)
				}, n15, 5},
				{"healed", func(w *fleetWorld) { w.set(mesh.StatusAlive, "n4", "n5") }, n15, 5},
			}},
		{name: "a pause of the leader", start: startFive,
			steps: []fleetStep{
				{"n2 leads while n1 is paused", func(w *fleetWorld) { w.leader = "n2"; w.set(mesh.StatusSuspect, "n1") }, n15, 5},
				{"n1 resumes", func(w *fleetWorld) { w.set(mesh.StatusAlive, "n1") }, n15, 5},
			}},
		{name: "a wiped disk", start: startFive,
			steps: []fleetStep{
				{"n3 comes back rejoining: it gives its seat back and waits", func(w *fleetWorld) { w.wipe("n3") },
					[]string{"n1", "n2", "n4", "n5"}, 4},
				{"caught up: promoted again", func(w *fleetWorld) { w.caughtUp("n3") }, n15, 4},
			}},
		{name: "a drain of the leader", start: startFive,
			steps: []fleetStep{
				{"n1 drains: it hands over, and the next leader demotes it",
					func(w *fleetWorld) { w.drain("n1") }, []string{"n2", "n3", "n4", "n5"}, 4},
				{"it leaves", func(w *fleetWorld) { w.set(mesh.StatusLeft, "n1") }, []string{"n2", "n3", "n4", "n5"}, 4},
				{"gone past the grace: three", func(w *fleetWorld) { w.tick(grace + time.Second) }, []string{"n2", "n3", "n4"}, 3},
			}},
		{name: "drains and kills at once", start: startFive,
			steps: []fleetStep{
				{"n3 and n4 die while n5 drains: its seat waits, the quorum needs it",
					func(w *fleetWorld) { w.set(mesh.StatusDead, "n3", "n4"); w.drain("n5") }, n15, 5},
				{"n3 comes back: the drained seat goes", func(w *fleetWorld) { w.set(mesh.StatusAlive, "n3") }, []string{"n1", "n2", "n3", "n4"}, 4},
				{"n5 leaves and is started again, n4 comes back: five", func(w *fleetWorld) {
					w.set(mesh.StatusLeft, "n5")
					w.converge()
					w.set(mesh.StatusAlive, "n4")
					w.join("n5")
				}, n15, 4},
			}},
		{name: "scale-down 5 -> 3 by drains", start: startFive,
			steps: []fleetStep{
				{"n4 and n5 drain", func(w *fleetWorld) { w.drain("n4", "n5") }, []string{"n1", "n2", "n3"}, 3},
				{"they leave", func(w *fleetWorld) { w.set(mesh.StatusLeft, "n4", "n5") }, []string{"n1", "n2", "n3"}, 3},
				{"gone past the grace: three", func(w *fleetWorld) { w.tick(grace + time.Second) }, []string{"n1", "n2", "n3"}, 3},
				{"then n3 drains and leaves for good: two gateways keep one voter", func(w *fleetWorld) {
					w.drain("n3")
					w.converge()
					w.set(mesh.StatusLeft, "n3")
					w.tick(grace + time.Second)
				}, []string{"n1"}, 1},
			}},
		{name: "blue/green", start: func(t *testing.T) *fleetWorld {
			return newFleetWorld(t, conf(voter("b1"), voter("b2"), voter("b3")), "b1", "b1", "b2", "b3")
		},
			steps: []fleetStep{
				{"green joins: six gateways, five voters", func(w *fleetWorld) { w.join("g1", "g2", "g3") },
					[]string{"b1", "b2", "b3", "g1", "g2"}, 3},
				{"blue drains: green takes every seat", func(w *fleetWorld) { w.drain("b1", "b2", "b3") },
					[]string{"g1", "g2", "g3"}, 3},
				{"blue leaves", func(w *fleetWorld) { w.set(mesh.StatusLeft, "b1", "b2", "b3") }, []string{"g1", "g2", "g3"}, 3},
				{"gone past the grace", func(w *fleetWorld) { w.tick(grace + time.Second) }, []string{"g1", "g2", "g3"}, 3},
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.start(t)
			w.converge()
			for i, s := range tt.steps {
				s.do(w)
				fewest := w.converge()
				if diff := cmp.Diff(s.voters, w.voters()); diff != "" {
					t.Fatalf("step %d (%s): voters (-want +got):\n%s\nconfiguration %v", i, s.what, diff, suffrages(w.cfg))
				}
				if fewest < s.fewest {
					t.Errorf("step %d (%s): %d voters on the way; want at least %d", i, s.what, fewest, s.fewest)
				}
				if w.leader == "" || !slices.Contains(w.voters(), w.leader) {
					t.Errorf("step %d (%s): leader %q is not a voter", i, s.what, w.leader)
				}
			}
		})
	}
}

// TestAutoVoterScenariosExplicitCount: --raft-voters 3 keeps today's behaviour through the same
// kill: the dead voter of three is removed past the grace.
func TestAutoVoterScenariosExplicitCount(t *testing.T) {
	w := newFleetWorld(t, conf(voter("n1"), voter("n2"), voter("n3")), "n1", "n1", "n2", "n3")
	w.opts.Voters = 3
	w.set(mesh.StatusDead, "n3")
	w.tick(2 * DefaultDeadVoterGrace)
	w.converge()
	if got, want := fmt.Sprint(w.voters()), "[n1 n2]"; got != want {
		t.Fatalf("voters %s; want %s", got, want)
	}
}
