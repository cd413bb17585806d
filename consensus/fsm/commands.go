package fsm

import (
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/worker"
)

// CommandType is the first byte of every raft log entry the FSM applies; the protobuf body of
// the command follows it. A type's number never changes once released.
type CommandType uint8

// The command types. An entry of a type this version does not know panics, unless
// IgnoreUnknownFlag is set.
const (
	TypeInitCluster CommandType = 1
	TypeRegister    CommandType = 2
	TypeReplaceSpec CommandType = 3
	TypeSetFlags    CommandType = 4
	TypeRemove      CommandType = 5
	TypeTransfer    CommandType = 6
	// TypeJournalOpen and TypeJournalResolve are the weight-update journal (journal.go). They
	// carry no IgnoreUnknownFlag: a node that skipped them would route to workers an update
	// holds disabled.
	TypeJournalOpen    CommandType = 7
	TypeJournalResolve CommandType = 8
	// TypeReassign is the batch ownership reassignment of failover (Reassign).
	TypeReassign CommandType = 9
	// TypeDrain puts a record in the draining state (Drain). It carries no IgnoreUnknownFlag:
	// a node that skipped it would go on routing to the worker, and, as its owner, never remove
	// it.
	TypeDrain CommandType = 10
	// TypeOperatorReassign is an operator's ownership change: drain marks and fenced moves
	// (OperatorReassign). It carries no IgnoreUnknownFlag: a node that skipped it would disagree on
	// every owner.
	TypeOperatorReassign CommandType = 11

	// IgnoreUnknownFlag, set on a type byte, tells a node that does not know the type to skip
	// the entry instead of panicking (Consul's rule): for commands a newer version may add
	// whose loss on an older node is harmless.
	IgnoreUnknownFlag CommandType = 0x80
)

var typeNames = map[CommandType]string{
	TypeInitCluster:      "init_cluster",
	TypeRegister:         "register",
	TypeReplaceSpec:      "replace_spec",
	TypeSetFlags:         "set_flags",
	TypeRemove:           "remove",
	TypeTransfer:         "transfer",
	TypeJournalOpen:      "journal_open",
	TypeJournalResolve:   "journal_resolve",
	TypeReassign:         "reassign",
	TypeDrain:            "drain",
	TypeOperatorReassign: "handoff",
}

// String names the type as the apply-duration metric labels it.
func (t CommandType) String() string {
	if n, ok := typeNames[t]; ok {
		return n
	}
	return fmt.Sprintf("unknown_%d", uint8(t))
}

// Command is a change to the fleet's durable state, as a proposer builds it. Only this package
// defines commands. Times and ids inside a command come from the proposer, never from the FSM.
type Command interface {
	Type() CommandType
	message() proto.Message
}

// Encode returns the log entry of c: its type byte followed by its protobuf body. It fails only
// on a command that cannot be encoded (such as a string that is not UTF-8), which is the
// proposer's input error.
func Encode(c Command) ([]byte, error) {
	buf := make([]byte, 1, 128)
	buf[0] = byte(c.Type())
	buf, err := proto.MarshalOptions{Deterministic: true}.MarshalAppend(buf, c.message())
	if err != nil {
		return nil, &InvalidError{Msg: fmt.Sprintf("%s command does not encode: %v", c.Type(), err)}
	}
	return buf, nil
}

// InitCluster sets the cluster id; the leader of a freshly bootstrapped cluster proposes it.
type InitCluster struct {
	ClusterID string
}

// Register creates a worker record owned by Owner. The same spec again is Unchanged; another
// spec under the same id is a conflict. ID empty means Spec.ID(); Spec must be normalized.
type Register struct {
	ID    worker.ID
	Spec  worker.Spec
	Owner string
	At    time.Time
}

// FlagChange changes the operator flags of a record; a nil flag is left as it is. Reason, By and
// At describe a disable and are dropped when the worker is enabled again.
type FlagChange struct {
	Disabled *bool
	Reason   string
	By       string
	At       time.Time
	IsDead   *bool
}

// ReplaceSpec replaces a record's spec (PUT, or PATCH once the proposer has merged it) and
// applies Flags in the same entry. ExpectedRevision non-zero makes it a compare-and-set, so that
// concurrent PATCHes cannot lose an update.
type ReplaceSpec struct {
	ID               worker.ID
	Spec             worker.Spec
	ExpectedRevision uint64
	Flags            FlagChange
}

// SetFlags changes only a record's flags; ExpectedRevision non-zero makes it a compare-and-set.
type SetFlags struct {
	ID               worker.ID
	Flags            FlagChange
	ExpectedRevision uint64
}

// Fence is an (owner, epoch) pair a command is valid under.
type Fence struct {
	Owner string
	Epoch uint64
}

// Remove deletes a record: unconditionally when Fence is nil (admin DELETE of a worker with
// nothing to drain), or only while the record's owner and epoch equal the fence (the owner's
// removals: health auto-removal, and the end of a drain).
type Remove struct {
	ID    worker.ID
	Fence *Fence
}

// Drain puts the record of ID in the draining state (admin DELETE of a ready worker): every
// gateway stops starting requests to it, and its owner removes the record, fenced by its
// (owner, epoch), once Settle has passed since At. A record already draining is Unchanged and
// keeps its first At and Settle, so that a DELETE sent again never postpones the removal.
type Drain struct {
	ID     worker.ID
	At     time.Time
	Settle time.Duration
}

// Transfer makes To the owner and sets the epoch to the entry's index. ExpectedEpoch non-zero
// makes it a compare-and-set on the epoch.
type Transfer struct {
	ID            worker.ID
	To            string
	ExpectedEpoch uint64
}

// Type implements Command.
func (InitCluster) Type() CommandType { return TypeInitCluster }

// Type implements Command.
func (Register) Type() CommandType { return TypeRegister }

// Type implements Command.
func (ReplaceSpec) Type() CommandType { return TypeReplaceSpec }

// Type implements Command.
func (SetFlags) Type() CommandType { return TypeSetFlags }

// Type implements Command.
func (Remove) Type() CommandType { return TypeRemove }

// Type implements Command.
func (Transfer) Type() CommandType { return TypeTransfer }

// Type implements Command.
func (Drain) Type() CommandType { return TypeDrain }

func (c InitCluster) message() proto.Message {
	return &consensusv1.InitClusterCommand{ClusterId: c.ClusterID}
}

func (c Register) message() proto.Message {
	id := c.ID
	if id == "" {
		id = c.Spec.ID()
	}
	return &consensusv1.RegisterWorkerCommand{
		Id:         string(id),
		Spec:       specToProto(&c.Spec),
		Owner:      c.Owner,
		AtUnixNano: unixNano(c.At),
	}
}

func (c ReplaceSpec) message() proto.Message {
	return &consensusv1.ReplaceSpecCommand{
		Id:               string(c.ID),
		Spec:             specToProto(&c.Spec),
		ExpectedRevision: c.ExpectedRevision,
		Flags:            c.Flags.toProto(),
	}
}

func (c SetFlags) message() proto.Message {
	return &consensusv1.SetFlagsCommand{
		Id:               string(c.ID),
		Flags:            c.Flags.toProto(),
		ExpectedRevision: c.ExpectedRevision,
	}
}

func (c Remove) message() proto.Message {
	m := &consensusv1.RemoveWorkerCommand{Id: string(c.ID)}
	if c.Fence != nil {
		m.Fence = &consensusv1.Fence{Owner: c.Fence.Owner, Epoch: c.Fence.Epoch}
	}
	return m
}

func (c Transfer) message() proto.Message {
	return &consensusv1.TransferOwnershipCommand{
		Id:            string(c.ID),
		To:            c.To,
		ExpectedEpoch: c.ExpectedEpoch,
	}
}

func (c Drain) message() proto.Message {
	return &consensusv1.DrainWorkerCommand{
		Id:          string(c.ID),
		AtUnixNano:  unixNano(c.At),
		SettleNanos: int64(c.Settle),
	}
}

func (f FlagChange) toProto() *consensusv1.FlagChange {
	if f.Disabled == nil && f.IsDead == nil {
		return nil
	}
	return &consensusv1.FlagChange{
		Disabled:   f.Disabled,
		Reason:     f.Reason,
		By:         f.By,
		AtUnixNano: unixNano(f.At),
		IsDead:     f.IsDead,
	}
}
