package consensus

import (
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/consensus/voters"
	"github.com/meshgw/meshgw/leader"
	"github.com/meshgw/meshgw/mesh"
)

// The helpers of the tests that run the voter reconciler (package consensus/voters) on real
// nodes. That package's own tests have their like; neither can import the other's.

var planNow = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func voter(id string) raft.Server {
	return raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress("a-" + id), Suffrage: raft.Voter}
}

func nonvoter(id string) raft.Server {
	return raft.Server{ID: raft.ServerID(id), Address: raft.ServerAddress("a-" + id), Suffrage: raft.Nonvoter}
}

func conf(servers ...raft.Server) raft.Configuration { return raft.Configuration{Servers: servers} }

// peer is id in region with status since ago before planNow, at address "a-"+id.
func peer(id, region string, status mesh.Status, ago time.Duration) voters.Peer {
	return voters.Peer{ID: id, RaftAddress: "a-" + id, Region: region, Status: status, Since: planNow.Add(-ago)}
}

func alive(id, region string) voters.Peer { return peer(id, region, mesh.StatusAlive, time.Minute) }

// draining is p drained by an operator.
func draining(p voters.Peer) voters.Peer { p.Draining = true; return p }

// fakeMembership is a voters.Membership whose peers a test sets. Its signals never block.
type fakeMembership struct {
	mu       sync.Mutex
	peers    map[string]voters.Peer
	watchers map[chan struct{}]struct{}
}

func newFakeMembership(peers ...voters.Peer) *fakeMembership {
	m := &fakeMembership{peers: make(map[string]voters.Peer), watchers: make(map[chan struct{}]struct{})}
	m.set(peers...)
	return m
}

func (m *fakeMembership) Peers() []voters.Peer {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]voters.Peer, 0, len(m.peers))
	for _, p := range m.peers {
		out = append(out, p)
	}
	return out
}

func (m *fakeMembership) Watch() (<-chan struct{}, func()) {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	m.watchers[ch] = struct{}{}
	m.mu.Unlock()
	return ch, func() {
		m.mu.Lock()
		delete(m.watchers, ch)
		m.mu.Unlock()
	}
}

// set records peers and signals every watcher without waiting.
func (m *fakeMembership) set(peers ...voters.Peer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, p := range peers {
		m.peers[p.ID] = p
	}
	for ch := range m.watchers {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// lateVoters is a voter reconciler for a node a test has yet to start: loop is the node's
// leader loop, and bind makes the reconciler (of cfg) once the node exists.
type lateVoters struct {
	*voters.Reconciler
	cfg  voters.Config
	loop leader.Loop
}

func newLateVoters(cfg voters.Config) *lateVoters { return &lateVoters{cfg: cfg} }

func (l *lateVoters) bind(t *testing.T, n *Node) {
	t.Helper()
	cfg := l.cfg
	cfg.Node = n
	r, err := voters.NewReconciler(cfg)
	if err != nil {
		t.Fatal(err)
	}
	l.Reconciler = r
	l.loop.Set(r)
}
