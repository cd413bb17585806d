package nemesis

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

var five = []string{"n1", "n2", "n3", "n4", "n5"}

func kill(g string) *claim {
	return &claim{kind: Kill, proc: []string{g}, stopped: []string{g}, down: []string{g}}
}

func cutOff(kind string, group, rest []string) *claim {
	c := &claim{kind: kind, net: group}
	for _, a := range group {
		for _, b := range rest {
			c.links = append(c.links, [2]string{a, b})
		}
	}
	return c
}

func wipe(g string) *claim {
	return &claim{kind: Wipe, only: []string{g}, stopped: []string{g}, down: []string{g}}
}

// TestRoomRules: which faults the room lets hold together, on 5 gateways with voters n1, n2
// and n3 (meshgw's default of 3 voters).
func TestRoomRules(t *testing.T) {
	voters := []string{"n1", "n2", "n3"}
	others := func(g string) []string {
		var out []string
		for _, o := range five {
			if o != g {
				out = append(out, o)
			}
		}
		return out
	}
	tests := []struct {
		name string
		held []*claim
		c    *claim
		want bool
	}{
		{"a kill alone", nil, kill("n1"), true},
		{"two kills of non-voters and one of a voter: rule 2", []*claim{kill("n4"), kill("n5")}, kill("n1"), false},
		{"a kill of a voter while another voter is down: rule 3", []*claim{kill("n1")}, kill("n2"), false},
		{"a kill of a non-voter while a voter is down", []*claim{kill("n1")}, kill("n4"), true},
		{"two faults of one gateway's process: rule 1", []*claim{kill("n4")}, &claim{kind: Pause, proc: []string{"n4"}, stopped: []string{"n4"}, down: []string{"n4"}}, false},
		{"a kill inside a partition of that gateway", []*claim{cutOff(PartitionOne, []string{"n1"}, others("n1"))}, kill("n1"), true},
		{"two partitions of one gateway: rule 1", []*claim{cutOff(PartitionOne, []string{"n4"}, others("n4"))}, cutOff(PartitionOneWay, []string{"n4"}, others("n4")), false},
		{"a voter cut off while another is killed: rule 3", []*claim{kill("n2")}, cutOff(PartitionOne, []string{"n1"}, others("n1")), false},
		{"a minority holding two voters: the quorum is on its side", nil, cutOff(PartitionMinority, []string{"n1", "n2"}, []string{"n3", "n4", "n5"}), true},
		{"a minority holding two voters while one of them is killed", []*claim{kill("n1")}, cutOff(PartitionMinority, []string{"n1", "n2"}, []string{"n3", "n4", "n5"}), false},
		{"a forced leader change while another voter is down", []*claim{kill("n3")}, cutOff(LeaderTransfer, []string{"n1"}, others("n1")), false},
		{"a wipe of a gateway in a partition: it needs its gateway to itself", []*claim{cutOff(PartitionOne, []string{"n4"}, others("n4"))}, wipe("n4"), false},
		{"two wipes: rule 4", []*claim{wipe("n4")}, wipe("n5"), false},
		{"a wipe still rejoining keeps its voter down", []*claim{{kind: Wipe, only: []string{"n1"}, down: []string{"n1"}}}, kill("n2"), false},
		{"a voter cut off while a non-voter is wiped: it may have been promoted as it went down",
			[]*claim{wipe("n4")}, cutOff(PartitionOne, []string{"n1"}, others("n1")), false},
		{"a kill of a voter while a non-voter is wiped", []*claim{wipe("n4")}, kill("n1"), false},
		{"a wipe of a non-voter while a voter is down", []*claim{kill("n1")}, wipe("n4"), false},
		{"a kill of a non-voter while another is wiped", []*claim{wipe("n4")}, kill("n5"), true},
		{"the bridge of a partition-majority is left alone", []*claim{{kind: PartitionMajority, net: []string{"n1"}, only: []string{"n3"}}}, kill("n3"), false},
		{"engine faults: one per engine", []*claim{{kind: EngineHang, engines: []string{"e1"}}}, &claim{kind: EngineFlap, engines: []string{"e1"}}, false},
		{"engine faults on two engines", []*claim{{kind: EngineHang, engines: []string{"e1"}}}, &claim{kind: EngineFlap, engines: []string{"e2"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fits(tt.held, tt.c, five, voters); got != tt.want {
				t.Errorf("fits = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestPartitionMajorityKeepsAQuorum: a bridge leaves a quorum whichever gateways the voters are.
func TestPartitionMajorityKeepsAQuorum(t *testing.T) {
	a, b, bridge := []string{"n1", "n2"}, []string{"n4", "n5"}, "n3"
	c := &claim{kind: PartitionMajority, net: []string{"n1"}, only: []string{bridge}}
	for _, x := range a {
		for _, y := range b {
			c.links = append(c.links, [2]string{x, y})
		}
	}
	for _, voters := range [][]string{{"n1", "n2", "n4"}, {"n1", "n4", "n3"}, {"n1", "n2", "n3", "n4", "n5"}, {"n1", "n4", "n5"}} {
		if !fits(nil, c, five, voters) {
			t.Errorf("voters %v: no quorum", voters)
		}
	}
	// With voters n1, n2 and n4, a kill of n1 leaves n2 and n4 apart: no quorum.
	if fits([]*claim{c}, kill("n1"), five, []string{"n1", "n2", "n4"}) {
		t.Errorf("a kill of n1 beside the bridge partition kept a quorum of n2 and n4")
	}
}

// TestTurns: a gateway lane that has had more than lead faults more than a waiting one waits.
func TestTurns(t *testing.T) {
	now := time.Now()
	r := newRoom(five, nil)
	r.admitted = map[string]int{Kill: 5 + lead, Drain: 4}
	r.waiting = map[string]int{Kill: 1, Drain: 2}
	r.since = map[string]time.Time{Kill: now, Drain: now}
	if r.turnLocked(Kill, now) {
		t.Errorf("kill (%d) went before drain (4)", 5+lead)
	}
	if !r.turnLocked(Drain, now) {
		t.Errorf("drain (4) waited")
	}
	r.admitted[Drain] = 5
	if !r.turnLocked(Kill, now) {
		t.Errorf("kill (%d) waited for drain (5): lead is %d", 5+lead, lead)
	}
	delete(r.waiting, Drain)
	r.admitted[Drain] = 0
	if !r.turnLocked(Kill, now) {
		t.Errorf("kill waited for a drain lane that does not wait")
	}
}

// TestStarvedKindGoesFirst: among kinds with as many faults, one that has waited longer than
// starved holds back those that came to wait after it; those behind it, and those that came
// before it, still go.
func TestStarvedKindGoesFirst(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name  string
		count int           // kill's faults (drain has had 5)
		drain time.Duration // how long drain has waited
		kill  time.Duration // how long kill has waited
		want  bool          // kill may go
	}{
		{"drain waits, not starved yet", 5, starved / 2, 0, true},
		{"drain starved, kill came after it", 5, 2 * starved, 0, false},
		{"drain starved, kill came before it", 5, 2 * starved, 3 * starved, true},
		{"drain starved, kill behind it", 4, 2 * starved, 0, true},
		{"drain starved, kill ahead of it", 6, 2 * starved, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRoom(five, nil)
			r.admitted = map[string]int{Kill: tt.count, Drain: 5}
			r.waiting = map[string]int{Kill: 1, Drain: 1}
			r.since = map[string]time.Time{Kill: now.Add(-tt.kill), Drain: now.Add(-tt.drain)}
			if got := r.turnLocked(Kill, now); got != tt.want {
				t.Errorf("kill may go: %v, want %v", got, tt.want)
			}
		})
	}
	// A starved kind with a fault running: its other lane waits for that one, not for room.
	r := newRoom(five, nil)
	r.admitted = map[string]int{Kill: 5, Drain: 5}
	r.waiting = map[string]int{Kill: 1, Drain: 1}
	r.since = map[string]time.Time{Kill: now, Drain: now.Add(-2 * starved)}
	r.running = map[string]int{Drain: 1}
	if !r.turnLocked(Kill, now) {
		t.Errorf("kill held back for a drain lane that waits for another drain")
	}
	// Two starved kinds with as many faults: the one that waited longer goes, the other waits.
	r = newRoom(five, nil)
	r.admitted = map[string]int{Kill: 5, Drain: 5}
	r.waiting = map[string]int{Kill: 1, Drain: 1}
	r.since = map[string]time.Time{Kill: now.Add(-2 * starved), Drain: now.Add(-3 * starved)}
	if r.turnLocked(Kill, now) || !r.turnLocked(Drain, now) {
		t.Errorf("kill %v, drain %v: want drain only", r.turnLocked(Kill, now), r.turnLocked(Drain, now))
	}
}

// TestLeaveWait: a fault need not wait for a gateway to come back when another fault that holds
// it will: a cut-off gateway whose process another fault holds, a killed gateway another fault
// still cuts off. Two faults never leave the wait for a gateway to each other, and a wipe or a
// drain always waits.
func TestLeaveWait(t *testing.T) {
	cut := func() *claim { return cutOff(PartitionOne, []string{"n4"}, []string{"n1", "n2", "n3", "n5"}) }
	healedCut := func() *claim { c := cut(); c.links = nil; return c }
	tests := []struct {
		name  string
		c     *claim
		other *claim
		want  bool
	}{
		{"a partition's gateway that a kill holds", cut(), kill("n4"), true},
		{"a killed gateway still cut off by a partition", kill("n4"), cut(), true},
		{"a killed gateway whose partition healed", kill("n4"), healedCut(), false},
		{"a partition beside a kill of another gateway", cut(), kill("n5"), false},
		{"a wipe beside nothing it could hand to", wipe("n4"), healedCut(), false},
		{"a partition's gateway that a drain holds", cut(), &claim{kind: Drain, only: []string{"n4"}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRoom(five, nil)
			r.claims[tt.c], r.claims[tt.other] = true, true
			if got := r.leaveWait(tt.c, "n4"); got != tt.want {
				t.Errorf("leaveWait = %v, want %v", got, tt.want)
			}
			if tt.want && r.leaveWait(tt.other, "n4") {
				t.Errorf("the other fault left the wait for n4 back to the first")
			}
		})
	}
}

// oneWay is a cut of the packets from from to each gateway of to, theirs to it still passing:
// a forced leader change (the leader's raft requests dropped) or a partition-oneway.
func oneWay(kind, from string, to []string) *claim {
	c := &claim{kind: kind, net: []string{from}}
	for _, g := range to {
		c.links = append(c.links, [2]string{from, g})
	}
	return c
}

// TestRoomOneWayCut: a voter whose packets to the others are dropped while theirs reach it (the
// leader under a forced leader change, a partition-oneway) still hears every candidate and
// refuses one whose log is shorter than its own (it may hold an entry the others lack), and
// none of its answers arrive: it is no vote for a new leader, yet it still counts among the
// voters whose majority a leader needs. The rule counts it so whichever way the cut goes.
func TestRoomOneWayCut(t *testing.T) {
	three := []string{"n1", "n2", "n3"}
	tests := []struct {
		name   string
		voters []string
		held   []*claim
		c      *claim
		want   bool
	}{
		{"3 voters: a kill of a voter while the leader cannot send", three,
			[]*claim{oneWay(LeaderTransfer, "n2", []string{"n1", "n3", "n4", "n5"})}, kill("n1"), false},
		{"3 voters: a forced leader change while another voter is killed", three,
			[]*claim{kill("n1")}, oneWay(LeaderTransfer, "n2", []string{"n1", "n3", "n4", "n5"}), false},
		{"3 voters: a kill of a voter while another cannot send", three,
			[]*claim{oneWay(PartitionOneWay, "n3", []string{"n1", "n2", "n4", "n5"})}, kill("n1"), false},
		{"3 voters: a forced leader change while another voter cannot send", three,
			[]*claim{oneWay(PartitionOneWay, "n3", []string{"n1", "n2", "n4", "n5"})}, oneWay(LeaderTransfer, "n2", []string{"n1", "n3", "n4", "n5"}), false},
		{"3 voters: a kill of a non-voter while the leader cannot send", three,
			[]*claim{oneWay(LeaderTransfer, "n2", []string{"n1", "n3", "n4", "n5"})}, kill("n4"), true},
		{"5 voters: a forced leader change while another voter is killed (3 of 5 elect)", five,
			[]*claim{kill("n1")}, oneWay(LeaderTransfer, "n2", []string{"n1", "n3", "n4", "n5"}), true},
		{"5 voters: and a second kill leaves 2 of 5", five,
			[]*claim{kill("n1"), oneWay(LeaderTransfer, "n2", []string{"n1", "n3", "n4", "n5"})}, kill("n3"), false},
		{"5 voters: and a one-way cut of a third voter leaves 2 of 5", five,
			[]*claim{kill("n1"), oneWay(LeaderTransfer, "n2", []string{"n1", "n3", "n4", "n5"})},
			oneWay(PartitionOneWay, "n3", []string{"n1", "n2", "n4", "n5"}), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := fits(tt.held, tt.c, five, tt.voters); got != tt.want {
				t.Errorf("fits = %v, want %v", got, tt.want)
			}
		})
	}
	// The direction of the cut does not matter: the voter that cannot send, and the voter that
	// cannot be heard from, are each no vote for the other.
	for _, links := range [][][2]string{{{"n2", "n1"}, {"n2", "n3"}}, {{"n1", "n2"}, {"n3", "n2"}}} {
		c := &claim{kind: PartitionOneWay, net: []string{"n2"}, links: links}
		if quorum([]*claim{c, kill("n1")}, three) {
			t.Errorf("links %v and n1 down: quorum of n2 and n3", links)
		}
		if !quorum([]*claim{c}, three) {
			t.Errorf("links %v alone: no quorum of n1 and n3", links)
		}
	}
}

// TestHealedDrainKeepsItsVoterDown: a drained gateway that runs again has left raft; it comes
// back as a non-voter that a leader must add and promote. Until its fault is released (the
// gateway back), the room counts its voter seat down, even while the raft view it last read
// (refreshed only every 300 ms, kept while no gateway names a leader) still lists it: seed
// 20261201 drained n4 and n5 while n1 was wiped, the view still named n2 to n5 voters, and a
// forced leader change on n2 was let in; n2 then demoted n4 and n5, leaving n2 and n3, and with
// n2's packets dropped raft had no leader for 45 s.
func TestHealedDrainKeepsItsVoterDown(t *testing.T) {
	voters := []string{"n2", "n3", "n4", "n5"}
	drain := func(g, via string) *claim {
		return &claim{kind: Drain, only: []string{g}, proc: []string{via}, down: []string{g}}
	}
	r := newRoom(five, nil)
	held := []*claim{{kind: Wipe, only: []string{"n1"}, down: []string{"n1"}}, drain("n4", "n2"), drain("n5", "n3")}
	for _, c := range held {
		r.claims[c] = true
	}
	r.healed(held[1])
	r.healed(held[2])
	others := []string{"n1", "n3", "n4", "n5"}
	if fits(held, cutOff(LeaderTransfer, []string{"n2"}, others), five, voters) {
		t.Errorf("a forced leader change on n2 was let in beside two drains that ran again and a wipe: only n3 is left to vote")
	}
}

// TestAwaitRejoinKeepsWaiting: a wipe still rejoining after settle is reported once, and its
// fault keeps waiting (and so keeps its claim) until the gateway rejoined or the faults end.
func TestAwaitRejoinKeepsWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var lates int
		awaitRejoin(context.Background(), context.Background(),
			func() bool { return time.Since(start) >= settle+time.Minute }, func() { lates++ })
		if took := time.Since(start); lates != 1 || took < settle+time.Minute {
			t.Fatalf("rejoined %v after the wipe: reported %d times, returned after %v", settle+time.Minute, lates, took)
		}

		ctx, cancel := context.WithTimeout(context.Background(), settle+10*time.Second)
		defer cancel()
		start, lates = time.Now(), 0
		awaitRejoin(ctx, context.Background(), func() bool { return false }, func() { lates++ })
		if took := time.Since(start); lates != 1 || took < settle+10*time.Second || took > settle+11*time.Second {
			t.Fatalf("never rejoined, faults over %v in: reported %d times, returned after %v", settle+10*time.Second, lates, took)
		}

		start, lates = time.Now(), 0
		awaitRejoin(context.Background(), context.Background(), func() bool { return time.Since(start) >= time.Second }, func() { lates++ })
		if lates != 0 {
			t.Fatalf("rejoined within settle: reported %d times", lates)
		}
	})
}
