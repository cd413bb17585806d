package fleetack

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/mesh"
)

// DefaultFleetAckTimeout is --fleet-ack-timeout-secs: how long a write waits for the fleet to
// apply it before it answers naming the peers that lag.
const DefaultFleetAckTimeout = 5 * time.Second

// leaderFeedEvery is how often a follower checks that it follows its leader's WatchApplied
// stream, which brings the leader's commit notices, besides each entry it applies.
const leaderFeedEvery = time.Second

// Applied is a gateway's data plane as fleet acknowledgements see it: the raft index its pool
// has applied and published. gateway/fleet.Reconciler implements it.
type Applied interface {
	// WaitApplied returns the applied index once it is at least index, or when ctx ends.
	WaitApplied(ctx context.Context, index uint64) uint64
}

// FleetAckOptions configures a FleetAck. The zero value of every optional field is a working
// default.
type FleetAckOptions struct {
	// Local is this gateway's data plane. Required.
	Local Applied
	// Members is the mesh: the alive members that are not foreign are the live peers a write
	// waits for. Required.
	Members MemberList
	// ResolveRPC returns a peer's gRPC address (its --rpc-port listener) by node id. Required.
	ResolveRPC func(nodeID string) (addr string, ok bool)
	// Timeout bounds the wait for the fleet (--fleet-ack-timeout-secs). Zero means
	// DefaultFleetAckTimeout.
	Timeout time.Duration
	// Credentials secure the connections to peers. Nil means insecure (plain TCP).
	Credentials credentials.TransportCredentials
	// DialOptions are added to every connection to a peer (the cluster key's per-call
	// credentials).
	DialOptions []grpc.DialOption
	// Logger receives the WARN line of a write some peers did not acknowledge in time. Nil
	// means slog.Default().
	Logger *slog.Logger
	// Registerer receives meshgw_fleet_acks_total and meshgw_fleet_ack_lagging_total. Nil means
	// they are not registered.
	Registerer prometheus.Registerer
}

// AckReport says which live peers acknowledged a write (their data plane applied its index)
// within the timeout, and which lagged. Both lists hold node ids, sorted, this node included.
type AckReport struct {
	Index   uint64   `json:"index"`
	Acked   []string `json:"acked"`
	Lagging []string `json:"lagging"`
}

// FleetAck makes writes fleet-acknowledged and reads linearizable (DESIGN.md section 3):
//
//   - Acknowledge waits until every live peer's data plane applied a write's index. Each
//     gateway follows every live peer's WatchApplied stream (ackfeed.go), on which the peer
//     pushes its applied index each time its pool publishes a new one: the writer learns it
//     directly, with no request per write and no gossip round in between. A peer that has not
//     pushed the index after feedGrace (or serves no stream) is also asked WaitApplied. The
//     leader's stream also pushes a commit notice each time its FSM applies an entry, and every
//     follower keeps its leader's stream open, so that the followers learn at once that the
//     write committed (commitnotice.go) instead of at raft's next AppendEntries. Each node
//     stores the commit index once its FSM applied an entry (Node.keepCommit), so by the time a
//     peer acknowledges a write, a restart would serve it (replay.go).
//   - Barrier is a read barrier: it asks the leader for its read index (ReadIndex: leadership
//     confirmed by a quorum, an entry of its term committed) and waits until this node's FSM
//     applied it, so that what it reads next includes every write acknowledged before.
//
// Its methods are safe for concurrent use. Register its service before the gRPC listener
// serves; Close it before the node shuts down.
type FleetAck struct {
	node *Node
	o    FleetAckOptions
	log  *slog.Logger
	dial []grpc.DialOption
	met  *ackMetrics

	// readyTerm is the last term in which this node, leading, committed a Barrier: from then on
	// its commit index covers every entry of earlier terms.
	readyTerm atomic.Uint64
	// notice is the last commit notice this node published while leading (nil: none), and
	// noticeSig is closed and replaced when it changes; the WatchApplied streams send it.
	notice    atomic.Pointer[commitNotice]
	noticeSig atomic.Pointer[chan struct{}]
	// recheck is feedRecheck in nanoseconds (tests shorten it).
	recheck atomic.Int64
	stop    chan struct{}
	wg      sync.WaitGroup

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn // by address
	feeds  map[string]*peerFeed        // by node id (ackfeed.go)
	closed bool
}

// NewFleetAck returns a FleetAck over node and starts its loop of commit notices.
func NewFleetAck(node *Node, o FleetAckOptions) (*FleetAck, error) {
	if node == nil || o.Local == nil || o.Members == nil || o.ResolveRPC == nil {
		return nil, errors.New("consensus: fleet acknowledgements need a node, Local, Members and ResolveRPC")
	}
	o.Timeout = cmp.Or(o.Timeout, DefaultFleetAckTimeout)
	creds := o.Credentials
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	met, err := newAckMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	a := &FleetAck{
		node: node, o: o, log: cmp.Or(o.Logger, slog.Default()).With("component", "fleet-ack"), met: met,
		dial: append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, o.DialOptions...),
		stop: make(chan struct{}), conns: make(map[string]*grpc.ClientConn), feeds: make(map[string]*peerFeed),
	}
	sig := make(chan struct{})
	a.noticeSig.Store(&sig)
	a.recheck.Store(int64(feedRecheck))
	a.wg.Add(1)
	go a.noticeLoop()
	return a, nil
}

// Timeout is the bound of one Acknowledge.
func (a *FleetAck) Timeout() time.Duration { return a.o.Timeout }

// Acknowledge waits until every live peer, this node included, has applied index to its data
// plane, or Timeout (or ctx) ends the wait, and reports who did. Live means alive or suspect in
// the mesh: a suspect peer may still route (a slow link, a paused process about to resume), so
// it is waited for and named when it lags. A peer that is dead, left or foreign when the write
// starts is not waited for; one the mesh declares so during the wait is waited for no longer and
// lags; one whose gRPC address is unknown, or that cannot be reached, lags. A report with
// laggards is also logged at WARN.
func (a *FleetAck) Acknowledge(ctx context.Context, index uint64) AckReport {
	ctx, cancel := context.WithTimeout(ctx, a.o.Timeout)
	defer cancel()
	changes, unwatch := a.watchMembership() // before the peers are read: no change slips between
	defer unwatch()
	peers := a.livePeers()
	reached := make([]bool, len(peers))
	stops := make([]context.CancelFunc, len(peers))
	var wg sync.WaitGroup
	for i, id := range peers {
		pctx, stop := context.WithCancel(ctx)
		stops[i] = stop
		wg.Go(func() {
			defer stop()
			reached[i] = a.waitPeer(pctx, id, index)
		})
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	for waiting := true; waiting; {
		select {
		case <-all:
			waiting = false
		case <-changes:
			live := a.livePeers()
			for i, id := range peers {
				if _, ok := slices.BinarySearch(live, id); !ok {
					stops[i]() // dead, left or gone since the write started
				}
			}
		}
	}
	rep := AckReport{Index: index, Acked: []string{}, Lagging: []string{}}
	for i, id := range peers {
		if reached[i] {
			rep.Acked = append(rep.Acked, id)
		} else {
			rep.Lagging = append(rep.Lagging, id)
		}
	}
	a.met.observe(rep)
	if len(rep.Lagging) > 0 {
		a.log.Warn("peers did not apply a write within the fleet-ack timeout; they may still route by the state before it",
			"index", index, "lagging", rep.Lagging, "acked", rep.Acked, "timeout", a.o.Timeout)
	}
	return rep
}

// watchMembership watches the mesh's membership, without the progress-only changes when the
// mesh can leave them out (mesh.Mesh.WatchMembership).
func (a *FleetAck) watchMembership() (<-chan struct{}, func()) {
	if m, ok := a.o.Members.(interface {
		WatchMembership() (<-chan struct{}, func())
	}); ok {
		return m.WatchMembership()
	}
	return a.o.Members.Watch()
}

// livePeers are the members alive or suspect, this node included, sorted.
func (a *FleetAck) livePeers() []string {
	self := a.node.ID()
	out := []string{self}
	for _, m := range a.o.Members.Members() {
		if (m.Status == mesh.StatusAlive || m.Status == mesh.StatusSuspect) && m.ID != self {
			out = append(out, m.ID)
		}
	}
	slices.Sort(out)
	return out
}

// waitPeer waits until one peer's feed (or this node's data plane) reached index.
func (a *FleetAck) waitPeer(ctx context.Context, id string, index uint64) bool {
	if id == a.node.ID() {
		return a.o.Local.WaitApplied(ctx, index) >= index
	}
	return a.waitFeed(ctx, id, index)
}

// askPeer asks one peer to answer once it applied index (WaitApplied).
func (a *FleetAck) askPeer(ctx context.Context, id string, index uint64) bool {
	cc, err := a.conn(id)
	if err != nil {
		a.log.Debug("cannot ask a peer to acknowledge", "peer", id, "err", err)
		return false
	}
	// WaitForReady: a connection still being made (a new peer) is waited for within ctx.
	resp, err := consensusv1.NewFleetAckClient(cc).WaitApplied(ctx,
		&consensusv1.WaitAppliedRequest{Index: index, From: a.node.ID()}, grpc.WaitForReady(true))
	if err != nil {
		a.log.Debug("a peer did not acknowledge", "peer", id, "index", index, "err", err)
		return false
	}
	return resp.Reached && resp.Applied >= index
}

// conn returns the connection to a peer's gRPC listener, making it on first use.
func (a *FleetAck) conn(id string) (*grpc.ClientConn, error) {
	addr, ok := a.o.ResolveRPC(id)
	if !ok || addr == "" {
		return nil, errors.New("no gRPC address is known for " + id)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, ErrShutdown
	}
	if cc := a.conns[addr]; cc != nil {
		return cc, nil
	}
	cc, err := grpc.NewClient(addr, a.dial...)
	if err != nil {
		return nil, err
	}
	a.conns[addr] = cc
	return cc, nil
}

// noticeLoop publishes a commit notice after each entry the FSM applies while this node leads
// (the WatchApplied streams send it), and keeps this node following its leader's stream while
// it does not lead, so that it receives the leader's notices: on each entry applied, on each
// change of leader, and every leaderFeedEvery (a feed ends while its peer is not live).
func (a *FleetAck) noticeLoop() {
	defer a.wg.Done()
	defer a.node.recoverLog("fleet-ack commit notices")
	tick := time.NewTicker(leaderFeedEvery)
	defer tick.Stop()
	leaders := make(chan raft.Observation, 1)
	obs := raft.NewObserver(leaders, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	a.node.raft.RegisterObserver(obs)
	defer a.node.raft.DeregisterObserver(obs)
	for {
		applied := a.node.AppliedSignal() // before the entry: none slips between
		if c, ok := a.leaderNotice(); ok {
			if last := a.notice.Load(); last == nil || *last != c {
				a.notice.Store(&c)
				next := make(chan struct{})
				close(*a.noticeSig.Swap(&next))
			}
		} else {
			a.followLeader()
		}
		select {
		case <-a.stop:
			return
		case <-applied:
		case <-leaders:
		case <-tick.C:
		}
	}
}

// leaderNotice is the commit notice for the last entry this node's FSM applied, when it leads.
// The term is read before and after the state, so that the notice names a term in which this
// node led (raft changes the state before the term when it steps down).
func (a *FleetAck) leaderNotice() (commitNotice, bool) {
	r := a.node.raft
	term := r.CurrentTerm()
	if r.State() != raft.Leader || r.CurrentTerm() != term {
		return commitNotice{}, false
	}
	index, entryTerm := a.node.fsm.AppliedEntry()
	if entryTerm == 0 {
		return commitNotice{}, false // loaded or restored, not applied: its term is not known
	}
	return commitNotice{from: a.node.ID(), index: index, entryTerm: entryTerm, leaderTerm: term}, true
}

// followLeader starts following the leader's stream, when this node knows another leader and
// does not follow it yet.
func (a *FleetAck) followLeader() {
	_, leader := a.node.raft.LeaderWithID()
	id := string(leader)
	if id == "" || id == a.node.ID() {
		return
	}
	a.mu.Lock()
	_, following := a.feeds[id]
	a.mu.Unlock()
	if !following && a.isLive(id) {
		a.feed(id)
	}
}

// Close stops the loop of commit notices and closes the connections to peers. Calling it again does
// nothing.
func (a *FleetAck) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	conns := a.conns
	a.conns = nil
	a.mu.Unlock()
	close(a.stop)
	a.wg.Wait()
	a.met.unregister()
	var errs []error
	for _, cc := range conns {
		errs = append(errs, cc.Close())
	}
	return errors.Join(errs...)
}
