package fsm

import (
	"slices"
	"time"

	"google.golang.org/protobuf/proto"

	consensusv1 "github.com/meshgw/meshgw/api/consensus/v1"
	"github.com/meshgw/meshgw/worker"
)

// The outcomes of one target of a weight update, as JournalRecord.Outcomes holds them.
const (
	OutcomePending = "pending"
	OutcomeUpdated = "updated"
	OutcomeFailed  = "failed"
	OutcomeUnknown = "unknown"
)

// The statuses of an open weight-update record.
const (
	JournalRunning         = "running"
	JournalInterrupted     = "interrupted"
	JournalCoordinatorLost = "coordinator_lost"
	// JournalFailed is no stored status but JournalRecord.State's: a running record whose
	// update ended with a target not updated (failed or unknown).
	JournalFailed = "failed"
)

// The actions of a JournalResolve.
const (
	// ResolveOutcome records Outcome for Target.
	ResolveOutcome = "outcome"
	// ResolveComplete closes a record whose every target was updated, re-enabling the targets
	// that were enabled when it opened.
	ResolveComplete = "complete"
	// ResolveNotStarted closes a record whose update was never sent, re-enabling likewise.
	ResolveNotStarted = "not_started"
	// ResolveAcknowledge closes the record at an operator's word; every target stays disabled.
	ResolveAcknowledge = "acknowledge"
	// ResolveInterrupted and ResolveCoordinatorLost set the record's status.
	ResolveInterrupted     = "interrupted"
	ResolveCoordinatorLost = "coordinator_lost"
)

// journalReason is the disabled_reason a weight update gives its targets.
func journalReason(id string) string { return "weight update " + id }

// JournalOpen opens weight-update record ID, run by Coordinator, and disables Targets (those
// already disabled keep their flag and reason, and stay disabled when the update completes). It
// is rejected with a conflict while another record is open (one update at a time, SGLang-Omni),
// and with not found when a target has no record.
type JournalOpen struct {
	ID          string
	Coordinator string
	Targets     []worker.ID
	At          time.Time
}

// JournalResolve changes or closes the open record ID; Action is one of the Resolve* constants.
// Target and Outcome go with ResolveOutcome.
type JournalResolve struct {
	ID      string
	Action  string
	Target  worker.ID
	Outcome string
	At      time.Time
	By      string
}

// Type implements Command.
func (JournalOpen) Type() CommandType { return TypeJournalOpen }

// Type implements Command.
func (JournalResolve) Type() CommandType { return TypeJournalResolve }

func (c JournalOpen) message() proto.Message {
	m := &consensusv1.JournalOpenCommand{Id: c.ID, Coordinator: c.Coordinator, AtUnixNano: unixNano(c.At)}
	for _, t := range c.Targets {
		m.Targets = append(m.Targets, string(t))
	}
	return m
}

func (c JournalResolve) message() proto.Message {
	return &consensusv1.JournalResolveCommand{Id: c.ID, Action: c.Action, Target: string(c.Target),
		Outcome: c.Outcome, AtUnixNano: unixNano(c.At), By: c.By}
}

func applyJournalOpen(s *state, index uint64, m *consensusv1.JournalOpenCommand) Result {
	switch {
	case m.Id == "":
		return invalid("id", "empty")
	case m.Coordinator == "":
		return invalid("coordinator", "empty")
	case len(m.Targets) == 0:
		return invalid("targets", "empty")
	}
	if len(s.journal) > 0 {
		open := s.journal[0]
		if open.ID == m.Id {
			return Result{Outcome: Unchanged, Journal: cloneJournal(open)} // a retried open
		}
		return rejected(&ConflictError{Reason: "weight update " + open.ID + " is unresolved"}, nil)
	}
	j := &JournalRecord{ID: m.Id, Coordinator: m.Coordinator, StartedAt: fromUnixNano(m.AtUnixNano),
		Status: JournalRunning, Outcomes: make(map[worker.ID]string, len(m.Targets))}
	for _, t := range m.Targets {
		id := worker.ID(t)
		cur, ok := s.workers[id]
		if !ok {
			return notFound(id)
		}
		if _, dup := j.Outcomes[id]; dup {
			continue
		}
		j.Targets = append(j.Targets, id)
		j.Outcomes[id] = OutcomePending
		if cur.Disabled {
			j.PriorDisabled = append(j.PriorDisabled, id)
		}
	}
	disabled := true
	for _, id := range j.Targets {
		cur := s.workers[id]
		if cur.Disabled {
			continue
		}
		next := *cur
		applyFlags(&next, &consensusv1.FlagChange{Disabled: &disabled, Reason: journalReason(m.Id),
			By: m.Coordinator, AtUnixNano: m.AtUnixNano})
		s.update(cur, &next, true, index)
	}
	s.journal, s.journalChanged = []*JournalRecord{j}, true
	return Result{Outcome: Created, Journal: cloneJournal(j)}
}

func applyJournalResolve(s *state, index uint64, m *consensusv1.JournalResolveCommand) Result {
	i := slices.IndexFunc(s.journal, func(j *JournalRecord) bool { return j.ID == m.Id })
	if i < 0 {
		return rejected(&NotFoundError{Journal: m.Id}, nil)
	}
	next := cloneJournal(s.journal[i])
	switch m.Action {
	case ResolveOutcome:
		id := worker.ID(m.Target)
		switch m.Outcome {
		case OutcomeUpdated, OutcomeFailed, OutcomeUnknown:
		default:
			return invalid("outcome", "not one of updated, failed, unknown")
		}
		if _, ok := next.Outcomes[id]; !ok || next.Outcomes[id] == m.Outcome {
			return Result{Outcome: Unchanged, Journal: next} // no longer a target, or a retry
		}
		next.Outcomes[id] = m.Outcome
	case ResolveInterrupted, ResolveCoordinatorLost:
		if next.Status == m.Action {
			return Result{Outcome: Unchanged, Journal: next}
		}
		next.Status = m.Action
	case ResolveComplete:
		for _, id := range next.Targets {
			if next.Outcomes[id] != OutcomeUpdated {
				return rejected(&ConflictError{Reason: "target " + string(id) + " of weight update " + m.Id +
					" is " + next.Outcomes[id] + ", not updated"}, nil)
			}
		}
		s.enableTargets(next, index)
		s.dropJournal(i)
		return Result{Outcome: Removed, Journal: next}
	case ResolveNotStarted:
		s.enableTargets(next, index)
		s.dropJournal(i)
		return Result{Outcome: Removed, Journal: next}
	case ResolveAcknowledge:
		s.dropJournal(i)
		return Result{Outcome: Removed, Journal: next}
	default:
		return invalid("action", "unknown action "+m.Action)
	}
	s.journal[i], s.journalChanged = next, true
	return Result{Outcome: Updated, Journal: cloneJournal(next)}
}

// dropJournal closes the open record at i. The slice is copied, not changed in place: a
// snapshot may share the old one.
func (s *state) dropJournal(i int) {
	s.journal = slices.Delete(slices.Clone(s.journal), i, i+1)
	s.journalChanged = true
}

// enableTargets re-enables the targets of j that were enabled when it opened and that its open
// disabled (the flag still carries its reason: an operator's later disable stays).
func (s *state) enableTargets(j *JournalRecord, index uint64) {
	enabled := false
	for _, id := range j.Targets {
		cur, ok := s.workers[id]
		if !ok || slices.Contains(j.PriorDisabled, id) || !cur.Disabled || cur.DisabledReason != journalReason(j.ID) {
			continue
		}
		next := *cur
		applyFlags(&next, &consensusv1.FlagChange{Disabled: &enabled})
		s.update(cur, &next, true, index)
	}
}

// leaveJournal takes id out of the open records' targets, after an operator enabled it or its
// record was removed: it is no longer the update's to hold. A record left without targets is
// closed. It reports whether the journal changed.
func (s *state) leaveJournal(id worker.ID) bool {
	changed := false
	for i := 0; i < len(s.journal); i++ {
		j := s.journal[i]
		if !slices.Contains(j.Targets, id) {
			continue
		}
		next := cloneJournal(j)
		next.Targets = slices.DeleteFunc(next.Targets, func(t worker.ID) bool { return t == id })
		next.PriorDisabled = slices.DeleteFunc(next.PriorDisabled, func(t worker.ID) bool { return t == id })
		delete(next.Outcomes, id)
		changed = true
		if len(next.Targets) == 0 {
			s.dropJournal(i)
			i--
			continue
		}
		s.journal = slices.Clone(s.journal)
		s.journal[i], s.journalChanged = next, true
	}
	return changed
}

func cloneJournal(j *JournalRecord) *JournalRecord {
	c := j.Clone()
	return &c
}
