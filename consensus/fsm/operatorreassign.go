package fsm

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/worker"
)

// OperatorReassign is an operator's ownership change in one raft entry (DESIGN.md section 5): a
// drain, a transfer or a rebalance. It first marks the peers of Drain as draining (one already
// draining keeps its first Since, and takes the Started given) and clears the marks of Undrain,
// then applies each item as Reassign does, fenced on (owner, epoch); an item whose target is
// draining after the marks is skipped too. Unlike Reassign, a gateway forwards it to the leader,
// and its result travels back. A second copy of one entry changes nothing: its items are skipped
// ("already owned by").
type OperatorReassign struct {
	// Reason is "drain", "transfer" or "rebalance": for the log lines and the metrics.
	Reason  string
	Drain   []string
	Undrain []string
	// Started gives, by id, the start time of the process of each peer of Drain, as the
	// proposer's mesh knew it (DrainingPeer.Started). A peer left out is unknown.
	Started map[string]time.Time
	At      time.Time
	Items   []ReassignItem
}

// DrainingPeer is a peer marked draining, since when, and which process of it.
type DrainingPeer struct {
	ID    string
	Since time.Time
	// Started is the start time of the peer's process the drain is for, from its node metadata
	// (zero: unknown, then any process of the peer is drained). Another process of the same id,
	// the gateway started again after the mark was written, is not drained by the mark: the
	// leader clears it, and the gateway joins as a new one (ownership.Finished). See For.
	Started time.Time
}

// For reports whether the mark drains the process of the peer that started at started: the
// mark names that process, or none, or an earlier one while the mark was written after that
// process started. The last case is a drain sent moments after the peer was started again: the
// proposer's mesh still held the earlier process's start time (the new one's metadata had not
// reached it), yet the drain was asked of the process running then. Since is the proposer's
// clock and started the peer's, so the case is judged right while their skew is less than the
// time between the start and the drain.
func (d DrainingPeer) For(started time.Time) bool {
	return d.Started.IsZero() || d.Started.Equal(started) || (d.Started.Before(started) && d.Since.After(started))
}

// Type implements Command.
func (OperatorReassign) Type() CommandType { return TypeOperatorReassign }

func (c OperatorReassign) message() proto.Message {
	m := &consensusv1.HandoffCommand{Reason: c.Reason, Drain: c.Drain, Undrain: c.Undrain, AtUnixNano: unixNano(c.At),
		Items: make([]*consensusv1.ReassignItem, len(c.Items))}
	for id, t := range c.Started {
		if !t.IsZero() {
			if m.DrainStartedUnixNano == nil {
				m.DrainStartedUnixNano = make(map[string]int64, len(c.Started))
			}
			m.DrainStartedUnixNano[id] = t.UnixNano()
		}
	}
	for i, it := range c.Items {
		m.Items[i] = &consensusv1.ReassignItem{Id: string(it.ID), ExpectedOwner: it.From.Owner, ExpectedEpoch: it.From.Epoch, To: it.To}
	}
	return m
}

// applyOperatorReassign marks and clears draining peers, then moves each item whose fence holds. An
// empty peer id, or an item with an empty id, owner or target, makes the whole entry invalid. The
// outcome is Updated when a mark or an owner changed, else Unchanged.
func applyOperatorReassign(s *state, index uint64, m *consensusv1.HandoffCommand) Result {
	for i, id := range m.Drain {
		if id == "" {
			return invalid(fmt.Sprintf("drain[%d]", i), "empty")
		}
	}
	for i, id := range m.Undrain {
		if id == "" {
			return invalid(fmt.Sprintf("undrain[%d]", i), "empty")
		}
	}
	if res, ok := checkItems(m.Items); !ok {
		return res
	}
	marked := s.mark(m.Drain, m.Undrain, m.DrainStartedUnixNano, fromUnixNano(m.AtUnixNano))
	res := moveItems(s, index, m.Items, func(to string) bool { _, d := s.draining[to]; return d })
	if marked {
		res.Outcome = Updated
	}
	return res
}

// mark applies the drain marks, copying the map on a change (snapshots share the old one), and
// reports whether anything changed. A new mark is since at and for the process of started (by
// id, Unix nanoseconds); a mark that exists keeps its time and takes the process given.
func (s *state) mark(drain, undrain []string, started map[string]int64, at time.Time) bool {
	next := maps.Clone(s.draining)
	if next == nil {
		next = make(map[string]DrainingPeer)
	}
	changed := false
	for _, id := range drain {
		cur, ok := next[id]
		if !ok {
			cur, changed = DrainingPeer{ID: id, Since: at}, true
		}
		if ns := started[id]; ns != 0 && !cur.Started.Equal(fromUnixNano(ns)) {
			cur.Started, changed = fromUnixNano(ns), true
		}
		next[id] = cur
	}
	for _, id := range undrain {
		if _, ok := next[id]; ok {
			delete(next, id)
			changed = true
		}
	}
	if changed {
		s.draining = next
	}
	return changed
}

// checkItems validates the items of a Reassign or an OperatorReassign.
func checkItems(items []*consensusv1.ReassignItem) (Result, bool) {
	for i, it := range items {
		field := fmt.Sprintf("items[%d]", i)
		switch {
		case it.Id == "":
			return invalid(field+".id", "empty"), false
		case it.To == "":
			return invalid(field+".to", "empty"), false
		case it.ExpectedOwner == "":
			return invalid(field+".expected_owner", "empty"), false
		}
	}
	return Result{}, true
}

// moveItems is the fenced move of a Reassign (failover) and of an OperatorReassign (drain,
// transfer, rebalance): it moves each item whose record exists, is not already the target's, still
// has the item's (owner, epoch), and whose target refuse (nil: none) does not refuse, in that order
// of the skip reasons. A moved record gets the entry's index as its epoch and revision. The outcome
// is Updated when at least one record moved, else Unchanged.
func moveItems(s *state, index uint64, items []*consensusv1.ReassignItem, refuse func(to string) bool) Result {
	out := &ReassignResult{}
	for _, it := range items {
		id := worker.ID(it.Id)
		cur, ok := s.workers[id]
		switch {
		case !ok:
			out.Skipped = append(out.Skipped, ReassignSkip{ID: id, Reason: "not found"})
			continue
		case cur.Owner == it.To:
			out.Skipped = append(out.Skipped, ReassignSkip{ID: id, Reason: "already owned by " + it.To})
			continue
		case cur.Owner != it.ExpectedOwner || cur.Epoch != it.ExpectedEpoch:
			out.Skipped = append(out.Skipped, ReassignSkip{ID: id, Reason: fmt.Sprintf(
				"fenced: owner %q at epoch %d, not %q at epoch %d",
				cur.Owner, cur.Epoch, it.ExpectedOwner, it.ExpectedEpoch)})
			continue
		case refuse != nil && refuse(it.To):
			out.Skipped = append(out.Skipped, ReassignSkip{ID: id, Reason: it.To + " is draining"})
			continue
		}
		next := *cur
		next.Owner = it.To
		next.Epoch = index
		next.Revision = index
		s.put(&next)
		out.Moved = append(out.Moved, id)
	}
	res := Result{Outcome: Unchanged, Reassign: out}
	if len(out.Moved) > 0 {
		res.Outcome = Updated
	}
	return res
}

// Draining returns the peers marked draining, sorted by id.
func (f *FSM) Draining() []DrainingPeer {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return drainingList(f.st.draining)
}

func drainingList(m map[string]DrainingPeer) []DrainingPeer {
	out := slices.Collect(maps.Values(m))
	slices.SortFunc(out, func(a, b DrainingPeer) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// drainingToProto and drainingFromProto are the snapshot's and the saved state's form.
func drainingToProto(m map[string]DrainingPeer) []*consensusv1.DrainingPeer {
	var out []*consensusv1.DrainingPeer
	for _, d := range drainingList(m) {
		out = append(out, &consensusv1.DrainingPeer{Id: d.ID, SinceUnixNano: unixNano(d.Since), StartedUnixNano: unixNano(d.Started)})
	}
	return out
}

func drainingFromProto(ps []*consensusv1.DrainingPeer) map[string]DrainingPeer {
	if len(ps) == 0 {
		return nil
	}
	out := make(map[string]DrainingPeer, len(ps))
	for _, p := range ps {
		out[p.Id] = DrainingPeer{ID: p.Id, Since: fromUnixNano(p.SinceUnixNano), Started: fromUnixNano(p.StartedUnixNano)}
	}
	return out
}
