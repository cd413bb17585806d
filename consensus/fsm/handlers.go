package fsm

import (
	"fmt"
	"reflect"
	"time"

	"google.golang.org/protobuf/proto"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/worker"
)

// handler applies the body of one command type to the state at a raft index.
type handler func(s *state, index uint64, body []byte) Result

// handlers is the dispatch table, indexed by type byte (Consul's style). A nil slot is an
// unknown type.
var handlers = [256]handler{
	TypeInitCluster:      on(applyInitCluster),
	TypeRegister:         on(applyRegister),
	TypeReplaceSpec:      on(applyReplaceSpec),
	TypeSetFlags:         on(applySetFlags),
	TypeRemove:           on(applyRemove),
	TypeTransfer:         on(applyTransfer),
	TypeReassign:         on(applyReassign),
	TypeDrain:            on(applyDrain),
	TypeOperatorReassign: on(applyOperatorReassign),

	TypeJournalOpen:    on(applyJournalOpen),
	TypeJournalResolve: on(applyJournalResolve),
}

// Known reports whether this version applies entries of type t (it has a handler).
func (t CommandType) Known() bool { return handlers[t] != nil }

// on wraps a typed handler with the decoding of its body. A body that does not decode panics:
// skipping it would let this node's state diverge from the others'.
func on[M any, PM interface {
	*M
	proto.Message
}](apply func(*state, uint64, PM) Result) handler {
	return func(s *state, index uint64, body []byte) Result {
		m := PM(new(M))
		if err := proto.Unmarshal(body, m); err != nil {
			panic(fmt.Sprintf("consensus/fsm: entry %d: %T does not decode: %v", index, m, err))
		}
		return apply(s, index, m)
	}
}

func applyInitCluster(s *state, _ uint64, m *consensusv1.InitClusterCommand) Result {
	switch s.clusterID {
	case m.ClusterId:
		if m.ClusterId == "" {
			return invalid("cluster_id", "empty")
		}
		return Result{Outcome: Unchanged}
	case "":
		s.clusterID = m.ClusterId
		return Result{Outcome: Created}
	}
	return rejected(&ConflictError{Reason: "cluster id is already set"}, nil)
}

func applyRegister(s *state, index uint64, m *consensusv1.RegisterWorkerCommand) Result {
	id := worker.ID(m.Id)
	switch {
	case id == "":
		return invalid("id", "empty")
	case m.Owner == "":
		return invalid("owner", "empty")
	}
	spec := specFromProto(m.Spec)
	if cur, ok := s.workers[id]; ok {
		// Never touches the flags: an operator's disabled or is_dead stays as it is.
		switch {
		case !reflect.DeepEqual(cur.Spec, spec):
			return conflict(cur, "already registered with another spec")
		case cur.Draining:
			// Unchanged would tell the caller the worker stays registered, seconds before its
			// owner removes it.
			return conflict(cur, "being removed (draining); register it again once its record is gone")
		}
		return Result{Outcome: Unchanged, Record: cur}
	}
	rec := &Record{
		ID:           id,
		Spec:         spec,
		Owner:        m.Owner,
		Epoch:        index,
		RegisteredAt: fromUnixNano(m.AtUnixNano),
		Revision:     index,
	}
	s.put(rec)
	return Result{Outcome: Created, Record: rec}
}

func applyReplaceSpec(s *state, index uint64, m *consensusv1.ReplaceSpecCommand) Result {
	cur, res, ok := lookupCAS(s, worker.ID(m.Id), m.ExpectedRevision)
	if !ok {
		return res
	}
	next := *cur
	next.Spec = specFromProto(m.Spec)
	changed := !reflect.DeepEqual(cur.Spec, next.Spec)
	if applyFlags(&next, m.Flags) {
		changed = true
	}
	return s.update(cur, &next, changed, index)
}

func applySetFlags(s *state, index uint64, m *consensusv1.SetFlagsCommand) Result {
	cur, res, ok := lookupCAS(s, worker.ID(m.Id), m.ExpectedRevision)
	if !ok {
		return res
	}
	next := *cur
	res = s.update(cur, &next, applyFlags(&next, m.Flags), index)
	if f := m.Flags; f != nil && f.Disabled != nil && !*f.Disabled {
		s.leaveJournal(cur.ID) // an operator enabled it: the update no longer holds it
	}
	return res
}

func applyRemove(s *state, _ uint64, m *consensusv1.RemoveWorkerCommand) Result {
	id := worker.ID(m.Id)
	cur, ok := s.workers[id]
	if !ok {
		return notFound(id)
	}
	if f := m.Fence; f != nil && (f.Owner != cur.Owner || f.Epoch != cur.Epoch) {
		return conflict(cur, "fenced: owner %q at epoch %d, not %q at epoch %d",
			cur.Owner, cur.Epoch, f.Owner, f.Epoch)
	}
	s.del(id)
	s.leaveJournal(id)
	return Result{Outcome: Removed, Record: cur}
}

func applyDrain(s *state, index uint64, m *consensusv1.DrainWorkerCommand) Result {
	switch {
	case m.AtUnixNano == 0:
		return invalid("at", "unset")
	case m.SettleNanos < 0:
		return invalid("settle", "negative")
	}
	id := worker.ID(m.Id)
	cur, ok := s.workers[id]
	if !ok {
		return notFound(id)
	}
	if cur.Draining {
		return Result{Outcome: Unchanged, Record: cur} // the first drain's deadline holds
	}
	next := *cur
	next.Draining = true
	next.DrainStartedAt = fromUnixNano(m.AtUnixNano)
	next.DrainSettle = time.Duration(m.SettleNanos)
	return s.update(cur, &next, true, index)
}

func applyTransfer(s *state, index uint64, m *consensusv1.TransferOwnershipCommand) Result {
	if m.To == "" {
		return invalid("to", "empty")
	}
	id := worker.ID(m.Id)
	cur, ok := s.workers[id]
	if !ok {
		return notFound(id)
	}
	if m.ExpectedEpoch != 0 && m.ExpectedEpoch != cur.Epoch {
		return conflict(cur, "epoch is %d, not %d", cur.Epoch, m.ExpectedEpoch)
	}
	if cur.Owner == m.To {
		return Result{Outcome: Unchanged, Record: cur}
	}
	next := *cur
	next.Owner = m.To
	next.Epoch = index
	return s.update(cur, &next, true, index)
}

// lookupCAS finds the record id and checks a compare-and-set on its revision (0 = none). When
// ok is false, res is the rejection.
func lookupCAS(s *state, id worker.ID, expected uint64) (cur *Record, res Result, ok bool) {
	cur, found := s.workers[id]
	if !found {
		return nil, notFound(id), false
	}
	if expected != 0 && expected != cur.Revision {
		return nil, conflict(cur, "revision is %d, not %d", cur.Revision, expected), false
	}
	return cur, Result{}, true
}

// update stores next in place of cur when changed, stamping its revision. Stored records are
// never modified in place (next is a copy), so snapshots and readers may share them.
func (s *state) update(cur, next *Record, changed bool, index uint64) Result {
	if !changed {
		return Result{Outcome: Unchanged, Record: cur}
	}
	next.Revision = index
	s.put(next)
	return Result{Outcome: Updated, Record: next}
}

// put stores rec, a new record never to be modified, and notes its id as changed. Every
// handler changes the workers through put and del, so that the change log names each change.
func (s *state) put(rec *Record) {
	s.workers[rec.ID] = rec
	s.touched = append(s.touched, rec.ID)
}

// del removes the record of id and notes id as changed.
func (s *state) del(id worker.ID) {
	delete(s.workers, id)
	s.touched = append(s.touched, id)
}

// applyFlags applies f to r and reports whether anything changed. Disabling an already disabled
// worker with the same reason and author is no change, so that a retried command (after an
// unknown outcome) is idempotent even though it carries a new time.
func applyFlags(r *Record, f *consensusv1.FlagChange) bool {
	if f == nil {
		return false
	}
	changed := false
	if f.Disabled != nil {
		switch {
		case *f.Disabled && (!r.Disabled || r.DisabledReason != f.Reason || r.DisabledBy != f.By):
			r.Disabled, r.DisabledReason, r.DisabledBy = true, f.Reason, f.By
			r.DisabledAt = fromUnixNano(f.AtUnixNano)
			changed = true
		case !*f.Disabled && r.Disabled:
			r.Disabled, r.DisabledReason, r.DisabledBy, r.DisabledAt = false, "", "", time.Time{}
			changed = true
		}
	}
	if f.IsDead != nil && *f.IsDead != r.IsDead {
		r.IsDead = *f.IsDead
		changed = true
	}
	return changed
}
