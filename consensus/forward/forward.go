package forward

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
)

// Defaults of Options.
const (
	// DefaultHops bounds the leaders one write is sent to in a row.
	DefaultHops = 3
	// DefaultNoLeaderWait bounds how long a write waits for a reachable leader.
	DefaultNoLeaderWait = 2 * time.Second
	// DefaultLeaderPoll is how often a waiting write looks at leadership again.
	DefaultLeaderPoll = 50 * time.Millisecond
	// DefaultDialTimeout bounds the connection to a leader's RPC listener.
	DefaultDialTimeout = time.Second
	// DefaultAttemptTimeout is how long a forwarded attempt waits for the leader's answer before
	// the forwarder looks for a newer leader: raft's default HeartbeatTimeout and
	// ElectionTimeout, after which a follower starts to suspect a silent leader.
	DefaultAttemptTimeout = time.Second
	// DefaultMaxResends bounds the re-sends of one write whose attempts ended without an answer.
	DefaultMaxResends = 3
)

// Node is the raft node a Forwarder writes through and the Forward service proposes on;
// *consensus.Node implements it.
type Node interface {
	// ID returns this node's raft server id.
	ID() string
	// ApplyEntry proposes an encoded entry of type typ on behalf of node from and waits until
	// this node applied it (consensus.Node.ApplyEntry); it must run on the leader.
	ApplyEntry(ctx context.Context, typ fsm.CommandType, entry []byte, from string) (fsm.Result, error)
	// Leader returns the leader this node knows, itself when it leads; ok is false when it
	// knows none, and a shut-down node knows "" (consensus.Node.Leader).
	Leader() (id string, ok bool)
}

// Options configures a Forwarder. The zero value of every optional field is a working default.
type Options struct {
	// ResolveRPC returns the gRPC address (host:port) of a node's --rpc-port listener by node
	// id; memberlist metadata provides it. Required.
	ResolveRPC func(nodeID string) (addr string, ok bool)
	// Credentials secure the connections to the leader. Nil means insecure (plain TCP): TLS
	// (DESIGN.md section 12) slots in here.
	Credentials credentials.TransportCredentials
	// DialOptions are added to every connection to a leader.
	DialOptions []grpc.DialOption
	// MaxHops bounds how many gateways one attempt sends the entry to in a row, following
	// NotLeader answers; the last *consensus.NotLeaderError is returned after that. Zero means
	// DefaultHops.
	MaxHops int
	// NoLeaderWait bounds the total time a write waits for a leader it can reach (no leader
	// known, a leader that is shutting down or cannot be dialled) before it fails with
	// consensus.ErrNoLeader. Zero means DefaultNoLeaderWait, times the node's raft multiplier
	// when it has one (as DialTimeout's and AttemptTimeout's defaults). The write's context
	// bounds it too.
	NoLeaderWait time.Duration
	// LeaderPoll is how often a waiting write looks at leadership again. Zero means
	// DefaultLeaderPoll.
	LeaderPoll time.Duration
	// DialTimeout bounds connecting to a leader. Zero means DefaultDialTimeout.
	DialTimeout time.Duration
	// AttemptTimeout is how long one forwarded attempt waits for the leader's answer before the
	// forwarder watches leadership: from then on, as soon as this node knows another leader (or
	// leads itself), the attempt is given up and the write re-sent there. A leader that is
	// paused or cut off never answers, and would otherwise hold the write until its deadline.
	// Zero means DefaultAttemptTimeout.
	AttemptTimeout time.Duration
	// MaxResends bounds how many times one write is re-sent after attempts that ended without
	// the leader's answer (see resend.go for why a re-send is safe). Zero means
	// DefaultMaxResends.
	MaxResends int
	// ApplyTimeout bounds a write whose context has no deadline. Zero means
	// consensus.DefaultApplyTimeout, the node's own bound (consensus.Config.ApplyTimeout).
	ApplyTimeout time.Duration
	// Logger receives the line of each re-sent write. Nil means slog.Default().
	Logger *slog.Logger
}

// Forwarder applies writes from any gateway: locally when this node leads, otherwise by sending
// the encoded entry to the leader's Forward service over gRPC. It keeps one connection per
// leader address, dropping idle ones when the leader moves. Its methods are safe for
// concurrent use.
type Forwarder struct {
	node Node
	o    Options
	log  *slog.Logger
	dial []grpc.DialOption
	done chan struct{}

	// probe tells a partition from a paused leader (quorum.go): watchQuorum runs it every
	// probeEvery, bounded by probeTimeout, and closes watched when it returns.
	probe        quorumProbe
	probeTimeout time.Duration
	watched      chan struct{}

	mu      sync.Mutex
	conns   map[string]*leaderConn
	current string // the address most recently sent to
	closed  bool
}

// leaderConn is a connection to one leader address and the number of writes using it.
type leaderConn struct {
	cc     *grpc.ClientConn
	client consensusv1.ForwardClient
	inUse  int
}

// New returns a Forwarder that applies through node. Shut it down before the node.
func New(node Node, o Options) (*Forwarder, error) {
	if node == nil || o.ResolveRPC == nil {
		return nil, errors.New("forward: a forwarder needs a node and Options.ResolveRPC")
	}
	if o.MaxHops <= 0 {
		o.MaxHops = DefaultHops
	}
	// The defaults of the waits that follow raft's timings scale as raft's do
	// (consensus.Config.RaftMultiplier): over a WAN a leader answers a round trip or two later.
	scale := time.Duration(1)
	if m, ok := node.(interface{ RaftMultiplier() int }); ok && m.RaftMultiplier() > 1 {
		scale = time.Duration(m.RaftMultiplier())
	}
	if o.NoLeaderWait <= 0 {
		o.NoLeaderWait = scale * DefaultNoLeaderWait
	}
	if o.LeaderPoll <= 0 {
		o.LeaderPoll = DefaultLeaderPoll
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = scale * DefaultDialTimeout
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = scale * DefaultAttemptTimeout
	}
	if o.MaxResends <= 0 {
		o.MaxResends = DefaultMaxResends
	}
	if o.ApplyTimeout <= 0 {
		o.ApplyTimeout = consensus.DefaultApplyTimeout
	}
	creds := o.Credentials
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	dial := append([]grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		// Reconnect to a leader whose listener was briefly down within NoLeaderWait, not after
		// gRPC's default second-and-more.
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: o.DialTimeout,
		}),
	}, o.DialOptions...)
	log := cmp.Or(o.Logger, slog.Default()).With("component", "forward", "node", node.ID())
	f := &Forwarder{node: node, o: o, log: log, dial: dial, done: make(chan struct{}), conns: make(map[string]*leaderConn),
		probeTimeout: scale * probeTimeout, watched: make(chan struct{})}
	go f.watchQuorum()
	return f, nil
}

// Apply has the contract of consensus.Node.Apply, from any node: it proposes cmd and waits
// until the leader has applied it, or ctx ends (without a deadline, ApplyTimeout bounds it).
// Every error says whether the write happened:
//
//   - nil or a business error of package fsm: applied, and the Result is the leader's (with
//     Result.Reassign for an OperatorReassign; a gateway never forwards Reassign, which failover
//     applies on the leader);
//   - *consensus.NotLeaderError (MaxHops answers followed), consensus.ErrNoLeader (also
//     *consensus.LeaderUnreachableError: no leader could be reached within NoLeaderWait),
//     consensus.ErrTimeout, consensus.ErrShutdown (this node or forwarder), ctx.Err(),
//     *fsm.InvalidError (the command does not encode): nothing was written;
//   - consensus.ErrOutcomeUnknown (wrapping the cause): the entry may or may not commit. An
//     attempt that ends without the leader's answer once the entry may be in its log (the
//     leader lost leadership, the connection broke, or the leader stayed silent for
//     AttemptTimeout while this node learnt of a newer one) is re-sent to the leader this node
//     knows next, bounded by ctx and MaxResends; the write answers consensus.ErrOutcomeUnknown
//     only when no re-send settles it: ctx ends first, no re-send reached a leader, or the
//     re-send was rejected with a conflict or not-found that the first copy may have caused
//     (the rejection is wrapped too).
func (f *Forwarder) Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	data, err := fsm.Encode(cmd)
	if err != nil {
		return fsm.Result{}, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.o.ApplyTimeout)
		defer cancel()
	}
	return f.forward(ctx, cmd.Type(), data)
}

// forward asks this node first, follows NotLeader answers up to MaxHops gateways in a row,
// waits for a reachable leader (bounded by NoLeaderWait) after an answer that wrote nothing and
// names no one to follow, and re-sends (up to MaxResends times) an attempt that ended without
// the leader's answer, once a leader is known again.
func (f *Forwarder) forward(ctx context.Context, typ fsm.CommandType, data []byte) (fsm.Result, error) {
	var (
		target    *consensus.NotLeaderError // nil: ask this node
		hops      int
		waitUntil time.Time   // set by the first wait
		pending   *unanswered // the first attempt that may be in a leader's log
		resends   int
	)
	for {
		if f.isClosed() {
			return pending.settle(fsm.Result{}, consensus.ErrShutdown)
		}
		var (
			res fsm.Result
			err error
		)
		if pending == nil {
			// A write not yet sent anywhere fails at once when this node is cut off from
			// the quorum; one that may be in a leader's log waits for its answer as ever.
			if err := f.cutOff(); err != nil {
				return fsm.Result{}, err
			}
		}
		if target == nil {
			res, err = f.local(ctx, typ, data)
		} else {
			hops++
			res, err = f.send(ctx, target, data)
		}
		var (
			nl *consensus.NotLeaderError
			un *unanswered
		)
		switch {
		case errors.As(err, &nl):
			if hops >= f.o.MaxHops {
				return pending.settle(fsm.Result{}, err)
			}
			target = nl
			if nl.Leader == f.node.ID() { // a stale peer names this node: look again here
				target = nil
			}
		case errors.Is(err, consensus.ErrNoLeader) && !errors.Is(err, consensus.ErrOutcomeUnknown):
			if werr := f.waitLeader(ctx, &waitUntil, err, pending == nil); werr != nil {
				return pending.settle(fsm.Result{}, werr)
			}
			target, hops = nil, 0
		case errors.As(err, &un):
			if pending == nil {
				pending = un
			}
			if resends >= f.o.MaxResends {
				return fsm.Result{}, fmt.Errorf("%w (sent %d times)", un.err, resends+1)
			}
			if werr := f.waitMoved(ctx, un.leader); werr != nil {
				return pending.settle(fsm.Result{}, werr)
			}
			resends++
			target, hops = nil, 0
			f.log.Info("re-sending a write that a raft leader did not answer", "command", typ, "asked", un.leader, "resend", resends, "err", un.err)
		default:
			res, err = pending.settle(res, err)
			res.Resent = pending != nil && err == nil
			return res, err
		}
	}
}

// local applies on this node. An entry that reached this node's log while it led and whose
// outcome is unknown (leadership lost) may be re-sent. A leader that finds itself cut off
// from the quorum while it holds the entry stops waiting for the commit (which would come only
// if the partition healed before its lease ran out): the write answers outcome unknown then,
// and is not re-sent.
func (f *Forwarder) local(ctx context.Context, typ fsm.CommandType, data []byte) (fsm.Result, error) {
	lctx, stopWatch := f.untilCutOff(ctx)
	res, err := f.node.ApplyEntry(lctx, typ, data, f.node.ID())
	stopWatch()
	if cut := cutOffCause(ctx, lctx); err != nil && cut != nil {
		if errors.Is(err, consensus.ErrOutcomeUnknown) {
			return res, fmt.Errorf("%w: this gateway led raft and was cut off from the quorum before the write committed (%v); it may apply if the partition heals first",
				consensus.ErrOutcomeUnknown, cut)
		}
		return res, cut // refused before it was appended: nothing written
	}
	if errors.Is(err, consensus.ErrOutcomeUnknown) && !errors.Is(err, consensus.ErrShutdown) && ctx.Err() == nil {
		return res, &unanswered{leader: f.node.ID(), err: err}
	}
	return res, err
}

// waitLeader waits until this node leads or knows another leader, for at least one poll, and
// for no longer than NoLeaderWait since the first wait of the write. When time is up it returns
// cause (nothing was written), wrapped with ctx's error when ctx ended. A fresh write (none of
// its copies may be in a leader's log) stops waiting when this node finds itself cut off from
// the quorum, and returns that.
func (f *Forwarder) waitLeader(ctx context.Context, until *time.Time, cause error, fresh bool) error {
	if until.IsZero() {
		*until = time.Now().Add(f.o.NoLeaderWait)
	}
	wctx, cancel := context.WithDeadline(ctx, *until)
	defer cancel()
	tick := time.NewTicker(f.o.LeaderPoll)
	defer tick.Stop()
	for {
		select {
		case <-wctx.Done():
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("%w: %w", cause, err)
			}
			return cause
		case <-f.done:
			return consensus.ErrShutdown
		case <-tick.C:
			if f.leaderKnown() {
				return nil
			}
			if fresh {
				if err := f.cutOff(); err != nil {
					return err
				}
			}
		}
	}
}

// cutOffNode is what a Node may tell of its contact with the leader: *consensus.Node's CutOff
// returns a *consensus.NoQuorumError once it has heard from no leader for longer than a
// leader's heartbeats allow.
type cutOffNode interface{ CutOff() error }

// leaderKnown reports whether this node leads or names another node as the leader.
func (f *Forwarder) leaderKnown() bool {
	_, ok := f.leaderID()
	return ok
}

// send hands the entry to the leader to over gRPC and reads its answer in Apply's terms.
func (f *Forwarder) send(ctx context.Context, to *consensus.NotLeaderError, data []byte) (fsm.Result, error) {
	addr, ok := f.o.ResolveRPC(to.Leader)
	if !ok || addr == "" {
		return fsm.Result{}, &consensus.LeaderUnreachableError{Leader: to.Leader, Err: errors.New("no RPC address is known for it")}
	}
	lc, err := f.acquire(addr)
	if err != nil {
		return fsm.Result{}, err
	}
	defer f.release(addr, lc)
	if err := f.readyUnlessCut(ctx, lc.cc); err != nil {
		var nq *consensus.NoQuorumError
		if cerr := ctx.Err(); cerr != nil || errors.As(err, &nq) {
			return fsm.Result{}, cmp.Or(cerr, err) // not sent
		}
		return fsm.Result{}, &consensus.LeaderUnreachableError{Leader: to.Leader, Address: addr, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return fsm.Result{}, err // not sent
	}
	// From here the leader may receive the entry: a failure without its answer is unknown.
	a, err := f.call(ctx, lc, to.Leader, addr, data)
	if err != nil {
		return fsm.Result{}, err
	}
	return f.read(ctx, to.Leader, addr, a)
}

// call sends the entry to the leader's Forward service and waits for the answer. After
// AttemptTimeout without one it watches leadership, and gives the call up (cancelling it) as
// soon as this node knows another leader than the one asked: the entry may be in the asked
// leader's log, and forward re-sends the write to the new one.
//
// It also gives the call up once this node finds itself cut off from the quorum (cutOff) while
// waiting: the answer cannot come before the partition heals, and the write answers outcome
// unknown then rather than when ctx ends (a region cut off on a WAN). It is not re-sent.
func (f *Forwarder) call(ctx context.Context, lc *leaderConn, leader, addr string, data []byte) (*consensusv1.ApplyResponse, error) {
	cctx, stopWatch := f.untilCutOff(ctx)
	a, now, err := consensus.UntilLeaderMoves(cctx, f.node, f.log, leader, f.o.AttemptTimeout, f.o.LeaderPoll,
		func(ctx context.Context) (*consensusv1.ApplyResponse, error) {
			return lc.client.Apply(ctx, &consensusv1.ApplyRequest{Entry: data, From: f.node.ID()})
		})
	stopWatch()
	cut := cutOffCause(ctx, cctx)
	switch {
	case err != nil && cut != nil:
		return nil, fmt.Errorf("%w: forwarded to %s at %s, and this gateway was cut off from the quorum before the answer came (%v); it may apply once the partition heals",
			consensus.ErrOutcomeUnknown, leader, addr, cut)
	case now != "":
		return nil, &unanswered{leader: leader, err: fmt.Errorf("%w: forwarded to %s at %s, which gave no answer within %v; %s leads now",
			consensus.ErrOutcomeUnknown, leader, addr, f.o.AttemptTimeout, now)}
	case err != nil:
		return nil, rpcError(ctx, leader, addr, err)
	}
	return a, nil
}

// untilCutOff is consensus.UntilCutOff with this node's verdict (cutOff: the last probe of the
// voters, quorum.go), asked every LeaderPoll.
func (f *Forwarder) untilCutOff(ctx context.Context) (context.Context, func()) {
	return consensus.UntilCutOff(ctx, f.o.LeaderPoll, f.cutOff)
}

// cutOffCause is the *consensus.NoQuorumError with which wctx (untilCutOff of ctx) ended, nil
// when it did not end, or ended with ctx.
func cutOffCause(ctx, wctx context.Context) *consensus.NoQuorumError {
	var nq *consensus.NoQuorumError
	if ctx.Err() == nil && errors.As(context.Cause(wctx), &nq) {
		return nq
	}
	return nil
}

// rpcError is an RPC that ended without the leader's answer. Unless ctx ended, the write may be
// re-sent.
func rpcError(ctx context.Context, leader, addr string, err error) error {
	switch status.Code(err) {
	case codes.Unimplemented, // no Forward service there: the entry was not looked at
		codes.Unauthenticated, codes.PermissionDenied: // the leader refused this node or the entry unread (PeerAuth)
		return &consensus.LeaderUnreachableError{Leader: leader, Address: addr, Err: err}
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w: forwarded to %s at %s: %w (%v)", consensus.ErrOutcomeUnknown, leader, addr, cerr, err)
	}
	return &unanswered{leader: leader, err: fmt.Errorf("%w: forwarded to %s at %s: %w", consensus.ErrOutcomeUnknown, leader, addr, err)}
}

// read turns the leader's answer into Apply's result and error.
func (f *Forwarder) read(ctx context.Context, leader, addr string, a *consensusv1.ApplyResponse) (fsm.Result, error) {
	said := func(s string) string { return fmt.Sprintf("leader %s at %s: %s", leader, addr, s) }
	switch a.Status {
	case consensusv1.ApplyStatus_APPLY_STATUS_APPLIED:
		res, err := resultFromWire(a)
		if err != nil {
			return fsm.Result{}, err
		}
		return res, res.Err
	case consensusv1.ApplyStatus_APPLY_STATUS_NOT_LEADER:
		if a.LeaderId == "" {
			return fsm.Result{}, fmt.Errorf("%w (%s)", consensus.ErrNoLeader, said("not the leader and names none"))
		}
		// Followed even when it names the node asked for (a stale address): MaxHops bounds it.
		return fsm.Result{}, &consensus.NotLeaderError{Leader: a.LeaderId, LeaderAddress: a.LeaderAddress}
	case consensusv1.ApplyStatus_APPLY_STATUS_NO_LEADER:
		return fsm.Result{}, fmt.Errorf("%w (%s)", consensus.ErrNoLeader, said("knows no leader"))
	case consensusv1.ApplyStatus_APPLY_STATUS_SHUTDOWN:
		return fsm.Result{}, &consensus.LeaderUnreachableError{Leader: leader, Address: addr, Err: errors.New("it is shutting down")}
	case consensusv1.ApplyStatus_APPLY_STATUS_CANCELED:
		if err := ctx.Err(); err != nil {
			return fsm.Result{}, err
		}
		return fsm.Result{}, &consensus.LeaderUnreachableError{Leader: leader, Address: addr, Err: errors.New("it dropped the request before proposing it")}
	case consensusv1.ApplyStatus_APPLY_STATUS_TIMEOUT:
		return fsm.Result{}, fmt.Errorf("%w (%s)", consensus.ErrTimeout, said(a.Message))
	case consensusv1.ApplyStatus_APPLY_STATUS_INVALID_ENTRY:
		return fsm.Result{}, &fsm.InvalidError{Msg: said(a.Message)}
	case consensusv1.ApplyStatus_APPLY_STATUS_OUTCOME_UNKNOWN:
		err := fmt.Errorf("%w: %s", consensus.ErrOutcomeUnknown, said(a.Message))
		if ctx.Err() != nil {
			return fsm.Result{}, err
		}
		return fsm.Result{}, &unanswered{leader: leader, err: err} // it lost leadership, or shut down: re-send
	}
	return fsm.Result{}, fmt.Errorf("%w: %s", consensus.ErrOutcomeUnknown, said(fmt.Sprintf("an answer this version does not know (%d)", a.Status)))
}

// readyUnlessCut is ready, given up (with the *consensus.NoQuorumError) once this node finds
// itself cut off from the quorum: over a cut link the connection would wait out DialTimeout.
func (f *Forwarder) readyUnlessCut(ctx context.Context, cc *grpc.ClientConn) error {
	rctx, stopWatch := f.untilCutOff(ctx)
	err := f.ready(rctx, cc)
	stopWatch()
	if cut := cutOffCause(ctx, rctx); err != nil && cut != nil {
		return cut
	}
	return err
}

// ready connects cc if it is not connected, bounded by DialTimeout. A connection in transient
// failure fails at once: the caller waits a poll and tries again.
func (f *Forwarder) ready(ctx context.Context, cc *grpc.ClientConn) error {
	ctx, cancel := context.WithTimeout(ctx, f.o.DialTimeout)
	defer cancel()
	cc.Connect()
	for {
		s := cc.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.TransientFailure:
			return errors.New("the connection failed")
		case connectivity.Shutdown:
			return consensus.ErrShutdown
		}
		if !cc.WaitForStateChange(ctx, s) {
			return fmt.Errorf("connecting: %w", ctx.Err())
		}
	}
}

// acquire returns the connection to addr, making it if needed, and closes the idle connections
// to other addresses: the leader has moved.
func (f *Forwarder) acquire(addr string) (*leaderConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, consensus.ErrShutdown
	}
	f.current = addr
	for a, lc := range f.conns {
		if a != addr && lc.inUse == 0 {
			_ = lc.cc.Close()
			delete(f.conns, a)
		}
	}
	lc := f.conns[addr]
	if lc == nil {
		cc, err := grpc.NewClient(addr, f.dial...)
		if err != nil {
			return nil, &consensus.LeaderUnreachableError{Address: addr, Err: err}
		}
		lc = &leaderConn{cc: cc, client: consensusv1.NewForwardClient(cc)}
		f.conns[addr] = lc
	}
	lc.inUse++
	return lc, nil
}

// release gives lc back, closing it if the leader has moved elsewhere meanwhile.
func (f *Forwarder) release(addr string, lc *leaderConn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	lc.inUse--
	if lc.inUse == 0 && addr != f.current && f.conns[addr] == lc {
		_ = lc.cc.Close()
		delete(f.conns, addr)
	}
}

func (f *Forwarder) isClosed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.closed
}

// Shutdown closes the connections to leaders. A write in flight on one of them ends with
// consensus.ErrOutcomeUnknown; later writes return consensus.ErrShutdown. Calling it again does
// nothing.
func (f *Forwarder) Shutdown() error {
	f.mu.Lock()
	if f.closed {
		f.mu.Unlock()
		return nil
	}
	f.closed = true
	close(f.done)
	var errs []error
	for a, lc := range f.conns {
		errs = append(errs, lc.cc.Close())
		delete(f.conns, a)
	}
	f.mu.Unlock()
	<-f.watched
	return errors.Join(errs...)
}
