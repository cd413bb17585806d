package consensus

import (
	"context"
	"errors"
	"fmt"
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
	"github.com/meshgw/meshgw/consensus/fsm"
)

// Defaults of ForwardOptions.
const (
	// DefaultRPCPort is --rpc-port: the gRPC listener that serves forwarding.
	DefaultRPCPort = 39529
	// DefaultForwardHops bounds the leaders one write is sent to in a row.
	DefaultForwardHops = 3
	// DefaultNoLeaderWait bounds how long a write waits for a reachable leader.
	DefaultNoLeaderWait = 2 * time.Second
	// DefaultLeaderPoll is how often a waiting write looks at leadership again.
	DefaultLeaderPoll = 50 * time.Millisecond
	// DefaultDialTimeout bounds the connection to a leader's RPC listener.
	DefaultDialTimeout = time.Second
)

// ForwardOptions configures a Forwarder. The zero value of every optional field is a working
// default.
type ForwardOptions struct {
	// ResolveRPC returns the gRPC address (host:port) of a node's --rpc-port listener by node
	// id; memberlist metadata provides it. Required.
	ResolveRPC func(nodeID string) (addr string, ok bool)
	// Credentials secure the connections to the leader. Nil means insecure (plain TCP): TLS
	// (DESIGN.md section 12) slots in here.
	Credentials credentials.TransportCredentials
	// DialOptions are added to every connection to a leader.
	DialOptions []grpc.DialOption
	// MaxHops bounds how many gateways one attempt sends the entry to in a row, following
	// NotLeader answers; the last *NotLeaderError is returned after that. Zero means
	// DefaultForwardHops.
	MaxHops int
	// NoLeaderWait bounds the total time a write waits for a leader it can reach (no leader
	// known, a leader that is shutting down or cannot be dialled) before it fails with
	// ErrNoLeader. Zero means DefaultNoLeaderWait. The write's context bounds it too.
	NoLeaderWait time.Duration
	// LeaderPoll is how often a waiting write looks at leadership again. Zero means
	// DefaultLeaderPoll.
	LeaderPoll time.Duration
	// DialTimeout bounds connecting to a leader. Zero means DefaultDialTimeout.
	DialTimeout time.Duration
}

// LeaderUnreachableError says this node knows a leader but could not hand it the write: no RPC
// address is known for it, it could not be dialled, or it answered that it is shutting down.
// Nothing was written. errors.Is(err, ErrNoLeader) is true: for a writer there is no leader.
type LeaderUnreachableError struct {
	// Leader is the leader's node id; Address its RPC address, "" when none is known.
	Leader  string
	Address string
	Err     error
}

func (e *LeaderUnreachableError) Error() string {
	at := ""
	if e.Address != "" {
		at = " at " + e.Address
	}
	return fmt.Sprintf("raft leader %s is unreachable%s: %v; nothing was written", e.Leader, at, e.Err)
}

// Is makes errors.Is(err, ErrNoLeader) true.
func (e *LeaderUnreachableError) Is(target error) bool { return target == ErrNoLeader }

// Unwrap returns the cause.
func (e *LeaderUnreachableError) Unwrap() error { return e.Err }

// Forwarder applies writes from any gateway: locally when this node leads, otherwise by sending
// the encoded entry to the leader's Forward service over gRPC. It keeps one connection per
// leader address, dropping idle ones when the leader moves. Its methods are safe for
// concurrent use.
type Forwarder struct {
	node *Node
	o    ForwardOptions
	dial []grpc.DialOption
	done chan struct{}

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

// NewForwarder returns a Forwarder that applies through node. Shut it down before the node.
func NewForwarder(node *Node, o ForwardOptions) (*Forwarder, error) {
	if node == nil || o.ResolveRPC == nil {
		return nil, errors.New("consensus: a forwarder needs a node and ForwardOptions.ResolveRPC")
	}
	if o.MaxHops <= 0 {
		o.MaxHops = DefaultForwardHops
	}
	if o.NoLeaderWait <= 0 {
		o.NoLeaderWait = DefaultNoLeaderWait
	}
	if o.LeaderPoll <= 0 {
		o.LeaderPoll = DefaultLeaderPoll
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
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
	return &Forwarder{node: node, o: o, dial: dial, done: make(chan struct{}), conns: make(map[string]*leaderConn)}, nil
}

// Apply has the contract of Node.Apply, from any node: it proposes cmd and waits until the
// leader has applied it, or ctx ends (without a deadline, the node's Config.ApplyTimeout
// bounds it). Every error says whether the write happened:
//
//   - nil or a business error of package fsm: applied, and the Result is the leader's (but
//     for Result.Reassign, which a forwarded answer does not carry: apply Reassign on the
//     leader, as failover does);
//   - *NotLeaderError (MaxHops answers followed), ErrNoLeader (also *LeaderUnreachableError:
//     no leader could be reached within NoLeaderWait), ErrTimeout, ErrShutdown (this node or
//     forwarder), ctx.Err(), *fsm.InvalidError (the command does not encode): nothing was
//     written;
//   - ErrOutcomeUnknown (wrapping the cause): the entry may or may not commit. Besides the
//     leader's own unknown outcomes, this is any failure of the RPC once it was sent (the
//     connection broke, the deadline passed), since the leader may have received it.
func (f *Forwarder) Apply(ctx context.Context, cmd fsm.Command) (fsm.Result, error) {
	data, err := fsm.Encode(cmd)
	if err != nil {
		return fsm.Result{}, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, f.node.cfg.ApplyTimeout)
		defer cancel()
	}
	return f.forward(ctx, cmd.Type(), data)
}

// forward asks this node first, follows NotLeader answers up to MaxHops gateways in a row, and
// waits for a reachable leader (bounded by NoLeaderWait) after an answer that wrote nothing and
// names no one to follow.
func (f *Forwarder) forward(ctx context.Context, typ fsm.CommandType, data []byte) (fsm.Result, error) {
	var (
		target    *NotLeaderError // nil: ask this node
		hops      int
		waitUntil time.Time // set by the first wait
	)
	for {
		if f.isClosed() {
			return fsm.Result{}, ErrShutdown
		}
		var (
			res fsm.Result
			err error
		)
		if target == nil {
			res, err = f.node.apply(ctx, typ, data)
		} else {
			hops++
			res, err = f.send(ctx, target, data)
		}
		var nl *NotLeaderError
		switch {
		case errors.As(err, &nl):
			if hops >= f.o.MaxHops {
				return fsm.Result{}, err
			}
			target = nl
			if nl.Leader == f.node.ID() { // a stale peer names this node: look again here
				target = nil
			}
		case errors.Is(err, ErrNoLeader) && !errors.Is(err, ErrOutcomeUnknown):
			if werr := f.waitLeader(ctx, &waitUntil, err); werr != nil {
				return fsm.Result{}, werr
			}
			target, hops = nil, 0
		default:
			return res, err
		}
	}
}

// waitLeader waits until this node leads or knows another leader, for at least one poll, and
// for no longer than NoLeaderWait since the first wait of the write. When time is up it returns
// cause (nothing was written), wrapped with ctx's error when ctx ended.
func (f *Forwarder) waitLeader(ctx context.Context, until *time.Time, cause error) error {
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
			return ErrShutdown
		case <-tick.C:
			if f.leaderKnown() {
				return nil
			}
		}
	}
}

// leaderKnown reports whether this node leads or names another node as the leader.
func (f *Forwarder) leaderKnown() bool {
	if f.node.closed.Load() {
		return true // the next apply says ErrShutdown
	}
	if f.node.IsLeader() {
		return true
	}
	_, id := f.node.raft.LeaderWithID()
	return id != "" && string(id) != f.node.ID()
}

// send hands the entry to the leader to over gRPC and reads its answer in Apply's terms.
func (f *Forwarder) send(ctx context.Context, to *NotLeaderError, data []byte) (fsm.Result, error) {
	addr, ok := f.o.ResolveRPC(to.Leader)
	if !ok || addr == "" {
		return fsm.Result{}, &LeaderUnreachableError{Leader: to.Leader, Err: errors.New("no RPC address is known for it")}
	}
	lc, err := f.acquire(addr)
	if err != nil {
		return fsm.Result{}, err
	}
	defer f.release(addr, lc)
	if err := f.ready(ctx, lc.cc); err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return fsm.Result{}, cerr // not sent
		}
		return fsm.Result{}, &LeaderUnreachableError{Leader: to.Leader, Address: addr, Err: err}
	}
	if err := ctx.Err(); err != nil {
		return fsm.Result{}, err // not sent
	}
	// From here the leader may receive the entry: a failure without its answer is unknown.
	a, err := lc.client.Apply(ctx, &consensusv1.ApplyRequest{Entry: data, From: f.node.ID()})
	if err != nil {
		return fsm.Result{}, rpcError(ctx, to.Leader, addr, err)
	}
	return f.read(ctx, to.Leader, addr, a)
}

// rpcError is an RPC that ended without the leader's answer.
func rpcError(ctx context.Context, leader, addr string, err error) error {
	if status.Code(err) == codes.Unimplemented { // no Forward service there: the entry was not looked at
		return &LeaderUnreachableError{Leader: leader, Address: addr, Err: err}
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%w: forwarded to %s at %s: %w (%v)", ErrOutcomeUnknown, leader, addr, cerr, err)
	}
	return fmt.Errorf("%w: forwarded to %s at %s: %w", ErrOutcomeUnknown, leader, addr, err)
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
			return fsm.Result{}, fmt.Errorf("%w (%s)", ErrNoLeader, said("not the leader and names none"))
		}
		// Followed even when it names the node asked for (a stale address): MaxHops bounds it.
		return fsm.Result{}, &NotLeaderError{Leader: a.LeaderId, LeaderAddress: a.LeaderAddress}
	case consensusv1.ApplyStatus_APPLY_STATUS_NO_LEADER:
		return fsm.Result{}, fmt.Errorf("%w (%s)", ErrNoLeader, said("knows no leader"))
	case consensusv1.ApplyStatus_APPLY_STATUS_SHUTDOWN:
		return fsm.Result{}, &LeaderUnreachableError{Leader: leader, Address: addr, Err: errors.New("it is shutting down")}
	case consensusv1.ApplyStatus_APPLY_STATUS_CANCELED:
		if err := ctx.Err(); err != nil {
			return fsm.Result{}, err
		}
		return fsm.Result{}, &LeaderUnreachableError{Leader: leader, Address: addr, Err: errors.New("it dropped the request before proposing it")}
	case consensusv1.ApplyStatus_APPLY_STATUS_TIMEOUT:
		return fsm.Result{}, fmt.Errorf("%w (%s)", ErrTimeout, said(a.Message))
	case consensusv1.ApplyStatus_APPLY_STATUS_INVALID_ENTRY:
		return fsm.Result{}, &fsm.InvalidError{Msg: said(a.Message)}
	case consensusv1.ApplyStatus_APPLY_STATUS_OUTCOME_UNKNOWN:
		return fsm.Result{}, fmt.Errorf("%w: %s", ErrOutcomeUnknown, said(a.Message))
	}
	return fsm.Result{}, fmt.Errorf("%w: %s", ErrOutcomeUnknown, said(fmt.Sprintf("an answer this version does not know (%d)", a.Status)))
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
			return ErrShutdown
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
		return nil, ErrShutdown
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
			return nil, &LeaderUnreachableError{Address: addr, Err: err}
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
// ErrOutcomeUnknown; later writes return ErrShutdown. Calling it again does nothing.
func (f *Forwarder) Shutdown() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	close(f.done)
	var errs []error
	for a, lc := range f.conns {
		errs = append(errs, lc.cc.Close())
		delete(f.conns, a)
	}
	return errors.Join(errs...)
}
