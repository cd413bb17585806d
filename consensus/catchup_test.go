package consensus

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshgw/meshgw/mesh"
)

// fakeProgress is a CatchUpNode whose leader and indexes a test sets.
type fakeProgress struct {
	signals
	mu                          sync.Mutex
	leader                      string
	commit, applied, fsmApplied uint64
}

func (n *fakeProgress) Info() (Info, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return Info{Leader: n.leader, AppliedIndex: n.fsmApplied}, nil
}

func (n *fakeProgress) Progress() (commit, applied uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.commit, n.applied
}

// set changes the node under its lock and signals.
func (n *fakeProgress) set(f func(n *fakeProgress)) {
	n.mu.Lock()
	f(n)
	n.mu.Unlock()
	n.signal()
}

// leaderMember is a member that published applied as its applied index.
func leaderMember(id string, s mesh.Status, applied uint64) mesh.Member {
	return mesh.Member{ID: id, Status: s, Meta: mesh.Meta{NodeID: id, AppliedIndex: applied}}
}

// TestCatchUp: a follower is caught up once raft applied the commit index it knew and the FSM
// the index the leader published, both taken when it first heard from an alive leader.
func TestCatchUp(t *testing.T) {
	type step struct {
		node    func(n *fakeProgress)
		members []mesh.Member
		want    bool
	}
	leaderAt := func(id string, commit, applied, fsmApplied uint64) func(n *fakeProgress) {
		return func(n *fakeProgress) { n.leader, n.commit, n.applied, n.fsmApplied = id, commit, applied, fsmApplied }
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{"caught up at once", []step{
			{leaderAt("L", 10, 10, 8), []mesh.Member{leaderMember("L", mesh.StatusAlive, 8)}, true},
		}},
		{"no leader", []step{
			{leaderAt("", 10, 10, 8), []mesh.Member{leaderMember("L", mesh.StatusAlive, 8)}, false},
		}},
		{"this node leads: the leader loop's business", []step{
			{leaderAt("self", 10, 10, 8), []mesh.Member{leaderMember("self", mesh.StatusAlive, 8)}, false},
		}},
		{"leader not alive in the mesh", []step{
			{leaderAt("L", 10, 10, 8), []mesh.Member{leaderMember("L", mesh.StatusSuspect, 8)}, false},
			{nil, []mesh.Member{}, false},
			{nil, []mesh.Member{leaderMember("L", mesh.StatusAlive, 8)}, true},
		}},
		{"raft behind the commit index", []step{
			{leaderAt("L", 12, 5, 4), []mesh.Member{leaderMember("L", mesh.StatusAlive, 10)}, false},
			{leaderAt("L", 12, 11, 9), nil, false},
			{leaderAt("L", 14, 12, 9), nil, false}, // raft is there; the FSM is behind the leader's 10
			{leaderAt("L", 14, 12, 10), nil, true},
		}},
		{"the targets are those of the first contact", []step{
			{leaderAt("L", 12, 5, 4), []mesh.Member{leaderMember("L", mesh.StatusAlive, 10)}, false},
			{leaderAt("L", 20, 12, 10), []mesh.Member{leaderMember("L", mesh.StatusAlive, 20)}, true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				node, members := &fakeProgress{}, &fakeMembers{}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var leader string
				var ok bool
				c := CatchUp{Self: "self", Node: node, Members: members, Poll: time.Hour, Logger: quiet()}
				done := runUntil(func() { leader, ok = c.Wait(ctx) })
				start := time.Now()
				for i, s := range tt.steps {
					if s.node != nil {
						node.set(s.node)
					}
					if s.members != nil {
						members.set(s.members...)
					}
					synctest.Wait()
					if isClosed(done) != s.want {
						t.Fatalf("step %d: caught up %v, want %v", i, isClosed(done), s.want)
					}
				}
				if d := time.Since(start); d != 0 {
					t.Errorf("%s passed: the signals were not followed at once", d)
				}
				cancel()
				<-done
				if want := tt.steps[len(tt.steps)-1].want; ok != want || (want && leader != "L") {
					t.Errorf("Wait returned %q, %v", leader, ok)
				}
			})
		})
	}
}

// TestCatchUpPolls: without signals, CatchUp looks again every Poll.
func TestCatchUpPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		node := &fakeProgress{leader: "L", commit: 10, applied: 3, fsmApplied: 3}
		members := &fakeMembers{members: []mesh.Member{leaderMember("L", mesh.StatusAlive, 8)}}
		c := CatchUp{Self: "self", Node: node, Members: members, Logger: quiet()}
		start := time.Now()
		done := runUntil(func() { c.Wait(context.Background()) })
		synctest.Wait()
		node.mu.Lock() // no signal
		node.applied, node.fsmApplied = 10, 8
		node.mu.Unlock()
		<-done
		if d := time.Since(start); d != DefaultCatchUpPoll {
			t.Errorf("caught up after %s, want the poll %s", d, DefaultCatchUpPoll)
		}
	})
}
