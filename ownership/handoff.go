package ownership

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/meshgw/meshgw/mesh"
	"github.com/meshgw/meshgw/worker"
)

// Reason is why a worker changed owner, as meshgw_ownership_handoffs_total{reason} labels it.
type Reason uint8

// The reasons of a move.
const (
	// ReasonDrain moves the workers of a draining peer (meshctl drain, --leave-on-terminate).
	ReasonDrain Reason = iota + 1
	// ReasonTransfer moves one worker an operator named (meshctl workers transfer).
	ReasonTransfer
	// ReasonRebalance evens out ownership (meshctl rebalance, --auto-rebalance).
	ReasonRebalance
	// ReasonFailover moves the workers of a gone owner.
	ReasonFailover
)

// Reasons lists every Reason, in the order of their values.
var Reasons = []Reason{ReasonDrain, ReasonTransfer, ReasonRebalance, ReasonFailover}

// String names the reason as the metric's label and the raft entry carry it.
func (r Reason) String() string {
	switch r {
	case ReasonDrain:
		return "drain"
	case ReasonTransfer:
		return "transfer"
	case ReasonRebalance:
		return "rebalance"
	case ReasonFailover:
		return "failover"
	}
	return "unknown"
}

// PlanHandoff returns the moves that take the workers of draining peers to the peers that are
// not draining, and the workers that cannot move. It is pure and deterministic, like
// PlanFailover, whose target rule it shares.
//
// Rules:
//
//  1. A worker whose owner is a listed peer with Draining set moves, whatever that peer's
//     status: an operator asked for it, so no grace applies.
//  2. It goes to the live (alive, not draining) peer of the highest rendezvous hash of
//     (worker id, peer id), among those of the worker's region (its spec's, else its owner's)
//     when there is one, else among every live peer: the rule of failover, so that a worker
//     lands where a failover would have put it.
//  3. A host-local worker, or any worker when no live peer is left, is stuck: it stays with its
//     owner and is returned in stuck, sorted by id.
func PlanHandoff(workers []Worker, peers []Peer) (moves []Move, stuck []worker.ID) {
	byID := peersByID(peers)
	live := receivers(byID)
	for _, w := range workers {
		owner, ok := byID[w.Owner]
		if !ok || !owner.Draining {
			continue
		}
		to := ""
		if !w.HostLocal && len(live) > 0 {
			to = pick(w.ID, live, regionOf(w, byID))
		}
		if to == "" || to == w.Owner {
			stuck = append(stuck, w.ID)
			continue
		}
		moves = append(moves, Move{ID: w.ID, From: w.Owner, Epoch: w.Epoch, To: to})
	}
	slices.SortFunc(moves, func(a, b Move) int { return cmp.Compare(a.ID, b.ID) })
	slices.Sort(stuck)
	return moves, stuck
}

// Refusals of PlanTransfer; a *TransferError wraps one of them.
var (
	// ErrUnknownPeer: the target is not a peer of the mesh.
	ErrUnknownPeer = errors.New("not a peer of this mesh")
	// ErrPeerUnavailable: the target is not alive, or is draining.
	ErrPeerUnavailable = errors.New("cannot take workers")
	// ErrHostLocal: the worker is host-local (ZMQ over ipc://): only its owner's host reaches it.
	ErrHostLocal = errors.New("host-local")
)

// TransferError is a refused transfer: which rule refused it, and the detail for the operator.
type TransferError struct {
	Err    error
	Detail string
}

func (e *TransferError) Error() string { return e.Detail }

// Unwrap returns the refusal, for errors.Is.
func (e *TransferError) Unwrap() error { return e.Err }

// PlanTransfer decides the move of one worker to the peer named to. It is pure. ok is false,
// with no error, when to already owns the worker: there is nothing to do.
//
// Rules: to must be a listed peer (ErrUnknownPeer), alive and not draining
// (ErrPeerUnavailable); a host-local worker never moves (ErrHostLocal). The move is fenced by
// the worker's owner and epoch as given.
func PlanTransfer(w Worker, to string, peers []Peer) (m Move, ok bool, err error) {
	if w.Owner == to {
		return Move{}, false, nil
	}
	p, listed := peersByID(peers)[to]
	switch {
	case !listed:
		return Move{}, false, &TransferError{ErrUnknownPeer, fmt.Sprintf("%s is not a peer of this mesh", to)}
	case p.Status != mesh.StatusAlive:
		return Move{}, false, &TransferError{ErrPeerUnavailable, fmt.Sprintf("%s is %s: only an alive peer takes workers", to, p.Status)}
	case p.Draining:
		return Move{}, false, &TransferError{ErrPeerUnavailable, fmt.Sprintf("%s is draining: it takes no workers", to)}
	case w.HostLocal:
		return Move{}, false, &TransferError{ErrHostLocal, fmt.Sprintf("%s is host-local (ipc://): only its owner's host reaches it", w.ID)}
	}
	return Move{ID: w.ID, From: w.Owner, Epoch: w.Epoch, To: to}, true, nil
}
