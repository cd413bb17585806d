package forward

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
)

// Register serves the Forward service of api/consensus/v1 on s: other gateways' writes,
// forwarded to this node because they believe it leads, proposed on node. Refusals are logged
// on log (nil: slog.Default()). The caller owns s, its listener (--rpc-port) and its
// credentials (TLS goes in the grpc.ServerOptions it makes s with), and stops s before it shuts
// the node down.
//
// Each request is proposed with the request's context, so its deadline is the caller's; a
// caller that gives up on a silent leader cancels it, and an entry proposed by then may still
// commit, which the caller's re-send accounts for (consensus/doc.go, "Unknown outcomes"). A
// follower answers NOT_LEADER (or NO_LEADER) and never forwards further: a write cannot loop.
// Every outcome of the apply is answered in the response with status OK (see forward.proto).
func Register(s grpc.ServiceRegistrar, node Node, log *slog.Logger) {
	log = cmp.Or(log, slog.Default()).With("component", "forward", "node", node.ID())
	consensusv1.RegisterForwardServer(s, &forwardServer{node: node, log: log})
}

// forwardServer is the leader's side of forwarding.
type forwardServer struct {
	consensusv1.UnimplementedForwardServer
	node Node
	log  *slog.Logger
}

// forwardable are the entry types a gateway forwards to the leader: the admin API's writes
// (Register, ReplaceSpec, SetFlags, Remove, Drain, the journal's, OperatorReassign), an owner's
// fenced Remove, and Transfer. The other types this version applies are leaderOnly: a gateway never
// forwards InitCluster (the leader of a new cluster proposes it on itself) or Reassign (failover
// runs on the leader and applies it there, never through a Forwarder: its result has no wire form);
// the service refuses them. A type this version does not apply is refused as an invalid entry,
// unless it is marked IgnoreUnknownFlag (a newer gateway's, which this version skips). Every
// command with a handler is in one of the two sets (TestEveryCommandIsForwardableOrLeaderOnly).
var (
	forwardable = map[fsm.CommandType]bool{
		fsm.TypeRegister:    true,
		fsm.TypeReplaceSpec: true,
		fsm.TypeSetFlags:    true,
		fsm.TypeRemove:      true,
		fsm.TypeTransfer:    true,
		fsm.TypeDrain:       true,
		// A weight update's coordinator is any gateway. Result.Journal does not cross the wire:
		// the coordinator reads the journal it needs from its own applied state.
		fsm.TypeJournalOpen:      true,
		fsm.TypeJournalResolve:   true,
		fsm.TypeOperatorReassign: true,
	}
	leaderOnly = map[fsm.CommandType]bool{
		fsm.TypeInitCluster: true,
		fsm.TypeReassign:    true,
	}
)

// Apply implements consensusv1.ForwardServer. Every outcome of an entry it takes is answered
// with status OK, since a status would tell the caller less than the answer does. It refuses
// with PermissionDenied, before decoding it, an entry of a type no gateway forwards. Who
// may call at all is decided before (PeerAuth, on the gRPC server).
func (s *forwardServer) Apply(ctx context.Context, req *consensusv1.ApplyRequest) (*consensusv1.ApplyResponse, error) {
	n, log := s.node, s.log
	if len(req.Entry) > 0 {
		if t := fsm.CommandType(req.Entry[0]) &^ fsm.IgnoreUnknownFlag; t.Known() && !forwardable[t] {
			log.Warn("refused a forwarded raft entry of a type no gateway forwards", "from", req.From, "command", t)
			return nil, status.Errorf(codes.PermissionDenied, "meshgw: refused: a gateway never forwards %s entries", t)
		}
	}
	typ, err := checkEntry(req.Entry)
	if err != nil {
		log.Warn("refused a forwarded raft entry that does not decode", "from", req.From, "err", err)
		return &consensusv1.ApplyResponse{Status: consensusv1.ApplyStatus_APPLY_STATUS_INVALID_ENTRY, Message: err.Error()}, nil
	}
	res, err := n.ApplyEntry(ctx, typ, req.Entry, req.From)
	a := answer(res, err)
	if log.Enabled(ctx, slog.LevelDebug) {
		log.Debug("forwarded write", "from", req.From, "command", typ, "status", a.Status, "index", a.Index, "err", err)
	}
	return a, nil
}

// answer turns what Node.ApplyEntry returned into the answer, keeping its meaning for the write.
func answer(res fsm.Result, err error) *consensusv1.ApplyResponse {
	status := func(s consensusv1.ApplyStatus) *consensusv1.ApplyResponse {
		return &consensusv1.ApplyResponse{Status: s, Message: errMessage(err)}
	}
	var nl *consensus.NotLeaderError
	switch {
	case err == nil || (res.Index != 0 && err == res.Err): // applied, maybe with a business error
		return resultToWire(res)
	case errors.Is(err, consensus.ErrOutcomeUnknown): // before ErrShutdown, which it may wrap
		return status(consensusv1.ApplyStatus_APPLY_STATUS_OUTCOME_UNKNOWN)
	case errors.As(err, &nl):
		return &consensusv1.ApplyResponse{
			Status:        consensusv1.ApplyStatus_APPLY_STATUS_NOT_LEADER,
			LeaderId:      nl.Leader,
			LeaderAddress: nl.LeaderAddress,
		}
	case errors.Is(err, consensus.ErrNoLeader):
		return status(consensusv1.ApplyStatus_APPLY_STATUS_NO_LEADER)
	case errors.Is(err, consensus.ErrTimeout):
		return status(consensusv1.ApplyStatus_APPLY_STATUS_TIMEOUT)
	case errors.Is(err, consensus.ErrShutdown):
		return status(consensusv1.ApplyStatus_APPLY_STATUS_SHUTDOWN)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status(consensusv1.ApplyStatus_APPLY_STATUS_CANCELED)
	}
	// Nothing else is expected; say unknown rather than claim nothing was written.
	return status(consensusv1.ApplyStatus_APPLY_STATUS_OUTCOME_UNKNOWN)
}

func errMessage(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// checkEntry reports whether the FSM would apply entry without panicking, and its type. An
// entry comes from another process here, and one that does not decode would stop every node
// that applies it, so it is decoded first, through the FSM's own dispatch table, on an empty
// scratch FSM: the handlers panic only when a body does not decode, never because of the state.
func checkEntry(entry []byte) (typ fsm.CommandType, err error) {
	if len(entry) == 0 {
		return 0, errors.New("the entry is empty")
	}
	typ = fsm.CommandType(entry[0]) &^ fsm.IgnoreUnknownFlag
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("%s entry: %v", typ, p)
		}
	}()
	scratch := fsm.New(slog.New(slog.NewTextHandler(io.Discard, nil)))
	scratch.Apply(&raft.Log{Index: 1, Data: entry})
	return typ, nil
}
