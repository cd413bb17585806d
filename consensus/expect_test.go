package consensus

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/test/testkit"
)

// signals is a Watch whose signals a test sends; they never block and coalesce as the real
// ones do.
type signals struct {
	mu       sync.Mutex
	watchers map[chan struct{}]struct{}
}

func (s *signals) Watch() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.watchers == nil {
		s.watchers = make(map[chan struct{}]struct{})
	}
	s.watchers[ch] = struct{}{}
	return ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		delete(s.watchers, ch)
	}
}

func (s *signals) signal() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// fakeMembers is a MemberList whose members a test sets.
type fakeMembers struct {
	signals
	mu      sync.Mutex
	members []mesh.Member
}

func (m *fakeMembers) Members() []mesh.Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.members)
}

// set replaces the members and signals.
func (m *fakeMembers) set(members ...mesh.Member) {
	m.mu.Lock()
	m.members = members
	m.mu.Unlock()
	m.signal()
}

// fakeBootstrapNode is a BootstrapNode that records its bootstraps; each answers the next of
// errs (nil once they run out) and a success gives it state.
type fakeBootstrapNode struct {
	mu       sync.Mutex
	hasState bool
	errs     []error
	calls    [][]raft.Server
	rejoined bool
}

func (n *fakeBootstrapNode) Rejoined(string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.rejoined = true
	return nil
}

func (n *fakeBootstrapNode) wasRejoined() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.rejoined
}

func (n *fakeBootstrapNode) HasState() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.hasState
}

func (n *fakeBootstrapNode) BootstrapWith(servers []raft.Server) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.calls = append(n.calls, servers)
	var err error
	if len(n.errs) > 0 {
		err, n.errs = n.errs[0], n.errs[1:]
	}
	n.hasState = n.hasState || err == nil || errors.Is(err, ErrHasState)
	return err
}

func (n *fakeBootstrapNode) setState() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.hasState = true
}

func (n *fakeBootstrapNode) bootstraps() [][]raft.Server {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.calls)
}

// expectMember is an alive member without a cluster id that publishes a raft address.
func expectMember(id string, edit ...func(*mesh.Member)) mesh.Member {
	m := mesh.Member{ID: id, Status: mesh.StatusAlive, Meta: mesh.Meta{NodeID: id, RaftAddr: "raft-" + id}}
	for _, e := range edit {
		e(&m)
	}
	return m
}

func expectVoters(ids ...string) []raft.Server {
	out := make([]raft.Server, len(ids))
	for i, id := range ids {
		out[i] = raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress("raft-" + id), Suffrage: raft.Voter}
	}
	return out
}

// runUntil runs f in a goroutine and returns a channel closed when it returns.
func runUntil(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	return done
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestExpectPeers: --bootstrap-expect counts the alive peers without a cluster id that publish
// a raft address and are not leaving, lowest id first (the one that bootstraps).
func TestExpectPeers(t *testing.T) {
	status := func(s mesh.Status) func(*mesh.Member) { return func(m *mesh.Member) { m.Status = s } }
	got := expectPeers([]mesh.Member{
		expectMember("gw-c"), expectMember("gw-a"), expectMember("gw-b"),
		expectMember("gw-0", status(mesh.StatusDead)),
		expectMember("gw-1", status(mesh.StatusLeft)),
		expectMember("gw-2", status(mesh.StatusForeign)),
		expectMember("gw-3", func(m *mesh.Member) { m.Meta.ClusterID = "c1" }),
		expectMember("gw-4", func(m *mesh.Member) { m.Meta.RaftAddr = "" }),
		expectMember("gw-5", func(m *mesh.Member) { m.Meta.Leaving = true }),
		expectMember("gw-6", status(mesh.StatusSuspect)),
	})
	var ids []string
	for _, m := range got {
		ids = append(ids, m.ID)
	}
	if diff := cmp.Diff([]string{"gw-a", "gw-b", "gw-c"}, ids); diff != "" {
		t.Errorf("bootstrap peers (-want +got):\n%s", diff)
	}
}

// TestExpectBootstrap: the lowest id proposes once Expect peers without a cluster id are alive;
// the others wait for raft state; a failed bootstrap is retried at the next poll.
func TestExpectBootstrap(t *testing.T) {
	withCluster := func(m *mesh.Member) { m.Meta.ClusterID = "c1" }
	tests := []struct {
		name       string
		self       string
		members    []mesh.Member
		errs       []error
		hasState   bool
		want       [][]raft.Server
		wantReturn bool
	}{
		{"lowest proposes", "a", []mesh.Member{expectMember("c"), expectMember("a"), expectMember("b")},
			nil, false, [][]raft.Server{expectVoters("a", "b", "c")}, true},
		{"too few", "a", []mesh.Member{expectMember("a"), expectMember("b")}, nil, false, nil, false},
		{"a peer with a cluster id does not count", "a",
			[]mesh.Member{expectMember("a"), expectMember("b"), expectMember("c", withCluster)}, nil, false, nil, false},
		{"more than expected: all of them", "a",
			[]mesh.Member{expectMember("a"), expectMember("b"), expectMember("c"), expectMember("d")},
			nil, false, [][]raft.Server{expectVoters("a", "b", "c", "d")}, true},
		{"not the lowest waits", "b", []mesh.Member{expectMember("a"), expectMember("b"), expectMember("c")},
			nil, false, nil, false},
		{"a failure is retried at the next poll", "a", []mesh.Member{expectMember("a"), expectMember("b"), expectMember("c")},
			[]error{errors.New("disk full")}, false, [][]raft.Server{expectVoters("a", "b", "c"), expectVoters("a", "b", "c")}, true},
		{"reached by a leader in between", "a", []mesh.Member{expectMember("a"), expectMember("b"), expectMember("c")},
			[]error{ErrHasState}, false, [][]raft.Server{expectVoters("a", "b", "c")}, true},
		{"state already", "a", []mesh.Member{expectMember("a"), expectMember("b"), expectMember("c")},
			nil, true, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				node := &fakeBootstrapNode{hasState: tt.hasState, errs: tt.errs}
				members := &fakeMembers{members: tt.members}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				b := ExpectBootstrap{Expect: 3, Self: tt.self, Node: node, Members: members, Logger: testkit.Quiet()}
				done := runUntil(func() { b.Run(ctx) })
				testkit.Advance(DefaultBootstrapPoll) // one poll: enough for a retry
				if diff := cmp.Diff(tt.want, node.bootstraps()); diff != "" {
					t.Errorf("bootstraps (-want +got):\n%s", diff)
				}
				if isClosed(done) != tt.wantReturn {
					t.Errorf("returned %v, want %v", isClosed(done), tt.wantReturn)
				}
				// Rejoining ends exactly when the expected peers are all new, proposer or not.
				if want := len(expectPeers(tt.members)) >= 3 && !tt.hasState; node.wasRejoined() != want {
					t.Errorf("rejoining ended %v, want %v", node.wasRejoined(), want)
				}
				cancel()
				<-done
			})
		})
	}
}

// TestExpectBootstrapFollows: the bootstrap follows the mesh's signal at once (no time passes),
// and a node that waits ends when raft state arrives, at the next poll at the latest.
func TestExpectBootstrapFollows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		node := &fakeBootstrapNode{}
		members := &fakeMembers{members: []mesh.Member{expectMember("a"), expectMember("b")}}
		b := ExpectBootstrap{Expect: 3, Self: "a", Node: node, Members: members, Logger: testkit.Quiet()}
		start := time.Now()
		done := runUntil(func() { b.Run(context.Background()) })
		synctest.Wait()
		members.set(expectMember("a"), expectMember("b"), expectMember("c"))
		<-done
		if d := time.Since(start); d != 0 {
			t.Errorf("the proposal waited %s", d)
		}
		if len(node.bootstraps()) != 1 {
			t.Errorf("bootstraps %v", node.bootstraps())
		}
	})
	synctest.Test(t, func(t *testing.T) {
		node := &fakeBootstrapNode{}
		members := &fakeMembers{members: []mesh.Member{expectMember("a"), expectMember("b"), expectMember("c")}}
		b := ExpectBootstrap{Expect: 3, Self: "c", Node: node, Members: members, Poll: time.Minute, Logger: testkit.Quiet()}
		start := time.Now()
		done := runUntil(func() { b.Run(context.Background()) })
		synctest.Wait()
		node.setState() // the proposer reached this node; no mesh signal
		<-done
		if d := time.Since(start); d != time.Minute {
			t.Errorf("ended after %s, want the poll (1m)", d)
		}
		if len(node.bootstraps()) != 0 {
			t.Errorf("a node that is not the lowest bootstrapped: %v", node.bootstraps())
		}
	})
}
