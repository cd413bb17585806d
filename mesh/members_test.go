package mesh

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMemberListStatuses(t *testing.T) {
	t0 := time.Unix(1000, 0)
	e := func(id string, s Status, cluster string) *entry {
		return &entry{Member: Member{ID: id, Status: s, Meta: Meta{NodeID: id, ClusterID: cluster}}, seen: t0}
	}
	table := map[string]*entry{
		"c": e("c", StatusAlive, "X"),
		"a": e("a", StatusAlive, ""),
		"b": e("b", StatusDead, "Y"),  // another cluster: foreign, whatever memberlist says
		"d": e("d", StatusAlive, "X"), // refused later with a new cluster id
		"e": e("e", StatusLeft, "X"),
	}
	foreign := map[string]*entry{
		"d": e("d", StatusForeign, "Z"),
		"f": e("f", StatusForeign, "Z"),
	}
	got := memberList(table, foreign, "X")
	want := []Member{
		{ID: "a", Status: StatusAlive, Meta: Meta{NodeID: "a"}},
		{ID: "b", Status: StatusForeign, Meta: Meta{NodeID: "b", ClusterID: "Y"}},
		{ID: "c", Status: StatusAlive, Meta: Meta{NodeID: "c", ClusterID: "X"}},
		{ID: "d", Status: StatusForeign, Meta: Meta{NodeID: "d", ClusterID: "Z"}},
		{ID: "e", Status: StatusLeft, Meta: Meta{NodeID: "e", ClusterID: "X"}},
		{ID: "f", Status: StatusForeign, Meta: Meta{NodeID: "f", ClusterID: "Z"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if n := counts(got); n != [StatusUnknown + 1]int{0, 2, 0, 0, 1, 3} {
		t.Errorf("counts %v", n)
	}
	// A node without a cluster id yet sees nobody as foreign, except those already refused.
	if n := counts(memberList(table, foreign, "")); n != [StatusUnknown + 1]int{0, 2, 0, 1, 1, 2} {
		t.Errorf("counts without a cluster id %v", n)
	}
}

func TestIsForeign(t *testing.T) {
	for _, tt := range []struct {
		ours, theirs string
		want         bool
	}{{"", "", false}, {"X", "", false}, {"", "X", false}, {"X", "X", false}, {"X", "Y", true}} {
		if got := isForeign(tt.ours, tt.theirs); got != tt.want {
			t.Errorf("isForeign(%q, %q) = %v", tt.ours, tt.theirs, got)
		}
	}
}

func TestPrune(t *testing.T) {
	t0 := time.Unix(1000, 0)
	table := map[string]*entry{}
	for _, s := range statuses {
		table[s.String()] = &entry{Member: Member{ID: s.String(), Status: s}, seen: t0}
	}
	if prune(table, t0.Add(time.Minute), time.Minute) || len(table) != len(statuses) {
		t.Fatalf("pruned within the retention: %d left", len(table))
	}
	if !prune(table, t0.Add(time.Minute+1), time.Minute) {
		t.Fatal("nothing pruned after the retention")
	}
	var left []string
	for id := range table {
		left = append(left, id)
	}
	if len(left) != 2 || table["alive"] == nil || table["suspect"] == nil {
		t.Errorf("after the retention: %v, want alive and suspect", left)
	}
}

func TestStatusString(t *testing.T) {
	tests := []struct {
		s    Status
		want string
	}{
		{StatusAlive, "alive"}, {StatusSuspect, "suspect"}, {StatusDead, "dead"}, {StatusLeft, "left"},
		{StatusForeign, "foreign"}, {StatusUnknown, "unknown"}, {0, "invalid"}, {99, "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			if got := tt.s.String(); got != tt.want {
				t.Errorf("Status(%d).String() = %q, want %q", int(tt.s), got, tt.want)
			}
		})
	}
	var listed []string
	for _, s := range statuses {
		listed = append(listed, s.String())
	}
	if diff := cmp.Diff([]string{"alive", "suspect", "dead", "left", "foreign"}, listed); diff != "" {
		t.Errorf("the statuses Members returns (-want +got):\n%s", diff)
	}
}

// TestCountFollowsMembers: Count forgets a gone peer after the retention, as Members does.
func TestCountFollowsMembers(t *testing.T) {
	t0 := time.Unix(1000, 0)
	now := t0
	m := &Mesh{now: func() time.Time { return now }, retention: time.Minute,
		table: map[string]*entry{
			"a": {Member: Member{ID: "a", Status: StatusAlive}, seen: t0},
			"d": {Member: Member{ID: "d", Status: StatusDead}, seen: t0},
		},
		foreign: map[string]*entry{"f": {Member: Member{ID: "f", Status: StatusForeign}, seen: t0}},
	}
	m.local.Store(&localMeta{})
	if a, d, f := m.Count(StatusAlive), m.Count(StatusDead), m.Count(StatusForeign); a != 1 || d != 1 || f != 1 {
		t.Fatalf("within the retention: %d alive, %d dead, %d foreign; want 1 each", a, d, f)
	}
	now = t0.Add(time.Minute + 1)
	if a, d, f := m.Count(StatusAlive), m.Count(StatusDead), m.Count(StatusForeign); a != 1 || d != 0 || f != 0 {
		t.Errorf("after the retention: %d alive, %d dead, %d foreign; want 1, 0, 0", a, d, f)
	}
	for _, s := range []Status{0, StatusUnknown, 99} {
		if m.Count(s) != 0 {
			t.Errorf("status %v counts members", s)
		}
	}
}
