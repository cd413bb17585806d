package fleetack

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/mesh"
)

// DefaultTimeout is --fleet-ack-timeout-secs: how long a write waits for the fleet to apply it
// before it answers naming the peers that lag.
const DefaultTimeout = 5 * time.Second

// leaderFeedEvery is how often a follower checks that it follows its leader's WatchApplied
// stream, which brings the leader's commit notices, besides each entry it applies.
const leaderFeedEvery = time.Second

// Applied is a gateway's data plane as fleet acknowledgements see it: the raft index its pool
// has applied and published. gateway/fleet.Reconciler implements it; so does consensus.Node,
// whose data plane is then its FSM (tools and tests).
type Applied interface {
	// WaitApplied returns the applied index once it is at least index, or when ctx ends.
	WaitApplied(ctx context.Context, index uint64) uint64
}

// Saved is what a restart of this gateway would serve at once; consensus.Node implements it.
type Saved interface {
	// WaitSaved returns the index a restart serves once it is at least index, or when ctx
	// ends (consensus.Node.WaitSaved).
	WaitSaved(ctx context.Context, index uint64) uint64
}

// Commits is the raft node's side of the commit notices this service carries from the leader
// to its followers (consensus/commitnotice.go); consensus.Node implements it.
type Commits interface {
	// LeaderNotice returns the notice of the last entry this node's FSM applied, while it leads.
	LeaderNotice() (consensus.CommitNotice, bool)
	// OfferNotice hands raft a notice that this node's leader sent.
	OfferNotice(consensus.CommitNotice)
}

// Members is the mesh as fleet acknowledgements read it; *mesh.Mesh implements it.
type Members interface {
	// Members returns every member the mesh knows, this node included.
	Members() []mesh.Member
	// Watch returns a channel that receives, coalesced, after membership changes, and a
	// function that stops the watch.
	Watch() (<-chan struct{}, func())
}

// Options configures a FleetAck. The zero value of every optional field is a working default.
type Options struct {
	// Local is this gateway's data plane. Nil until SetLocal: this gateway then acknowledges
	// nothing.
	Local Applied
	// Saved, when set, holds an acknowledgement back until a restart would serve the index too,
	// so that an acknowledged write holds from the first request after a restart (fail-static).
	// Nil means an index is acknowledged once Local applied it.
	Saved Saved
	// Members is the mesh: the alive members that are not foreign are the live peers a write
	// waits for. Required.
	Members Members
	// ResolveRPC returns a peer's gRPC address (its --rpc-port listener) by node id. Required.
	ResolveRPC func(nodeID string) (addr string, ok bool)
	// Timeout bounds the wait for the fleet (--fleet-ack-timeout-secs). Zero means
	// DefaultTimeout.
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

// Report says which live peers acknowledged a write (their data plane applied its index)
// within the timeout, and which lagged. Both lists hold node ids, sorted, this node included.
type Report struct {
	Index   uint64   `json:"index"`
	Acked   []string `json:"acked"`
	Lagging []string `json:"lagging"`
}

// FleetAck makes writes fleet-acknowledged and reads linearizable (DESIGN.md section 3):
//
//   - Acknowledge waits until every live peer's data plane applied a write's index. Each
//     gateway follows every live peer's WatchApplied stream (feed.go), on which the peer
//     pushes its applied index each time its pool publishes a new one: the writer learns it
//     directly, with no request per write and no gossip round in between. A peer that has not
//     pushed the index after feedGrace (or serves no stream) is also asked WaitApplied. The
//     leader's stream also pushes a commit notice each time its FSM applies an entry, and every
//     follower keeps its leader's stream open, so that the followers learn at once that the
//     write committed (consensus/commitnotice.go) instead of at raft's next AppendEntries.
//     Each node stores the commit index once its FSM applied an entry, so by the time a peer
//     acknowledges a write, a restart would serve it (consensus/replay.go).
//   - Barrier is the node's read barrier (consensus.Node.ReadBarrier) over this service's
//     connections: the service answers a peer's ReadIndex with the leader's read index.
//
// Its methods are safe for concurrent use. Register its service before the gRPC listener
// serves; Close it before the node shuts down.
type FleetAck struct {
	node    *consensus.Node
	notices Commits // the node's
	o       Options
	log     *slog.Logger
	dial    []grpc.DialOption
	met     *ackMetrics
	// local is the data plane (Options.Local, SetLocal); nil until there is one.
	local atomic.Pointer[Applied]

	// notice is the last commit notice this node published while leading (nil: none), and
	// noticeSig is closed and replaced when it changes; the WatchApplied streams send it.
	notice    atomic.Pointer[consensus.CommitNotice]
	noticeSig atomic.Pointer[chan struct{}]
	// recheck is feedRecheck in nanoseconds (tests shorten it).
	recheck atomic.Int64
	stop    chan struct{}
	wg      sync.WaitGroup

	mu     sync.Mutex
	conns  map[string]*grpc.ClientConn // by address
	feeds  map[string]*peerFeed        // by node id (feed.go)
	closed bool
}

// New returns a FleetAck over node and starts its loop of commit notices.
func New(node *consensus.Node, o Options) (*FleetAck, error) {
	if node == nil || o.Members == nil || o.ResolveRPC == nil {
		return nil, errors.New("fleetack: fleet acknowledgements need a node, Members and ResolveRPC")
	}
	o.Timeout = cmp.Or(o.Timeout, DefaultTimeout)
	creds := o.Credentials
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	met, err := newAckMetrics(o.Registerer)
	if err != nil {
		return nil, err
	}
	a := &FleetAck{
		node: node, notices: node, o: o, log: cmp.Or(o.Logger, slog.Default()).With("component", "fleet-ack"), met: met,
		dial: append([]grpc.DialOption{grpc.WithTransportCredentials(creds)}, o.DialOptions...),
		stop: make(chan struct{}), conns: make(map[string]*grpc.ClientConn), feeds: make(map[string]*peerFeed),
	}
	sig := make(chan struct{})
	a.noticeSig.Store(&sig)
	a.recheck.Store(int64(feedRecheck))
	if o.Local != nil {
		a.SetLocal(o.Local)
	}
	a.wg.Add(1)
	go a.noticeLoop()
	return a, nil
}

// Timeout is the bound of one Acknowledge.
func (a *FleetAck) Timeout() time.Duration { return a.o.Timeout }

// SetLocal gives the service this gateway's data plane, when it is built after the service
// (meshgw starts its reconciler, whose passes fill the pool, only once the gateway serving the
// pool is built, after the gRPC listener serves).
func (a *FleetAck) SetLocal(local Applied) { a.local.Store(&local) }

// waitLocal returns the index this gateway acknowledges once it is at least index, or when ctx
// ends: what its data plane applied and, with Saved, what a restart would serve. Without a data
// plane it is 0.
func (a *FleetAck) waitLocal(ctx context.Context, index uint64) uint64 {
	local := a.local.Load()
	if local == nil {
		return 0
	}
	got := (*local).WaitApplied(ctx, index)
	if got < index || a.o.Saved == nil {
		return got
	}
	return min(got, a.o.Saved.WaitSaved(ctx, index))
}

// Acknowledge waits until every live peer, this node included, has applied index to its data
// plane, or Timeout (or ctx) ends the wait, and reports who did. Live means alive or suspect in
// the mesh: a suspect peer may still route (a slow link, a paused process about to resume), so
// it is waited for and named when it lags. A peer that is dead, left or foreign when the write
// starts is not waited for; one the mesh declares so during the wait is waited for no longer and
// lags; one whose gRPC address is unknown, or that cannot be reached, lags. A report with
// laggards is also logged at WARN.
func (a *FleetAck) Acknowledge(ctx context.Context, index uint64) Report {
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
	rep := Report{Index: index, Acked: []string{}, Lagging: []string{}}
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
		return a.waitLocal(ctx, index) >= index
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

// FleetAckClient returns a client of peer id's FleetAck service over this service's connection
// to it: how the read barrier asks the leader's read index (consensus.ReadIndexPeers).
func (a *FleetAck) FleetAckClient(id string) (consensusv1.FleetAckClient, error) {
	cc, err := a.conn(id)
	if err != nil {
		return nil, err
	}
	return consensusv1.NewFleetAckClient(cc), nil
}

// Barrier is the node's read barrier (consensus.Node.ReadBarrier) over this service's
// connections: it returns once this node's FSM applied every write acknowledged before the
// call. Close ends it with consensus.ErrShutdown.
func (a *FleetAck) Barrier(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-a.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := a.node.ReadBarrier(ctx, a)
	select {
	case <-a.stop:
		if err != nil {
			return consensus.ErrShutdown
		}
	default:
	}
	return err
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
		return nil, consensus.ErrShutdown
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
	defer a.recoverLog("fleet-ack commit notices")
	tick := time.NewTicker(leaderFeedEvery)
	defer tick.Stop()
	leaders, unwatch := a.node.WatchLeader()
	defer unwatch()
	for {
		applied := a.node.AppliedSignal() // before the entry: none slips between
		if c, ok := a.notices.LeaderNotice(); ok {
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

// followLeader starts following the leader's stream, when this node knows another leader and
// does not follow it yet.
func (a *FleetAck) followLeader() {
	id, _ := a.node.Leader()
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

// recoverLog turns a panic in a background goroutine into an error line with its stack.
func (a *FleetAck) recoverLog(what string) {
	if r := recover(); r != nil {
		a.log.Error("panic in background goroutine", "goroutine", what, "panic", r, "stack", string(debug.Stack()))
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
