package weights

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/worker"
)

const (
	// closeBound bounds closing the record of an update that did not start, retries included:
	// the admin API's bound on a write (docs/admin-api.md, "Limits"), long enough for an election.
	closeBound = 10 * time.Second
	// closeRetry is the pause between two attempts to close it.
	closeRetry = 500 * time.Millisecond
)

// The results of an update that sent nothing, besides "not_started".
const (
	// ResultUnresolved: closing the record failed; it stays open, its targets disabled.
	ResultUnresolved = "unresolved"
	// ResultOutcomeUnknown: closing the record may or may not have applied.
	ResultOutcomeUnknown = "outcome_unknown"
)

// notStarted closes the record of an update whose disable the gateways lagging did not apply
// in time, and says what became of it in rep: closed ("not_started": the targets are enabled
// again), left open (ResultUnresolved: no attempt within closeBound was written) or perhaps
// closed (ResultOutcomeUnknown).
func (c *Coordinator) notStarted(ctx context.Context, rep Report, lagging []string) Report {
	ids := make([]worker.ID, len(rep.Targets))
	for i, tr := range rep.Targets {
		ids[i] = tr.ID
	}
	why := fmt.Sprintf("gateways %v did not apply the disable of the targets in time; nothing was sent", lagging)
	err := c.closeNotStarted(ctx, rep.ID)
	switch {
	case err == nil:
		rep.Result = "not_started"
		rep.Message = fmt.Sprintf("%s, and journal record %s closed as not started: the targets are enabled again", why, rep.ID)
		c.log.Warn("weight update not started: the fleet did not acknowledge the disable", "id", rep.ID, "lagging", lagging)
	case errors.Is(err, consensus.ErrOutcomeUnknown):
		rep.Result = ResultOutcomeUnknown
		rep.Message = fmt.Sprintf("%s, but closing journal record %s as not started may or may not have applied (%v): "+
			"it may have enabled the targets %v again, or left the record open and them disabled. Read it with "+
			"meshctl journal show (GET /weight_update_journal); if it is open, enable each target with meshctl workers enable ID "+
			"(the engines hold their old weights; the record closes with its last target), or drop it with meshctl journal resolve --acknowledge and enable them",
			why, rep.ID, err, ids)
		c.log.Warn("weight update not started, and closing its record has an unknown outcome", "id", rep.ID, "lagging", lagging, "err", err)
	default:
		rep.Result = ResultUnresolved
		rep.Message = fmt.Sprintf("%s, but closing journal record %s as not started failed (%v): the record stays open and "+
			"its targets %v stay disabled. The engines hold their old weights: enable each target with meshctl workers enable ID "+
			"(the record closes with its last target), or drop the record with meshctl journal resolve --acknowledge and enable them",
			why, rep.ID, err, ids)
		c.log.Warn("weight update not started, and closing its record failed: it stays open with its targets disabled",
			"id", rep.ID, "lagging", lagging, "err", err)
	}
	c.cfg.Metrics.count(rep.Result)
	return rep
}

// closeNotStarted closes the record id as not started (fsm.ResolveNotStarted re-enables its
// targets) and waits for the fleet to apply it (finish). An attempt that surely wrote nothing (no
// leader, not the leader, not queued in time) is tried again every closeRetry while closeBound
// lasts; any other error, ErrOutcomeUnknown included, ends it at once.
func (c *Coordinator) closeNotStarted(ctx context.Context, id string) error {
	deadline := time.Now().Add(closeBound)
	for {
		err := c.finish(ctx, fsm.JournalResolve{ID: id, Action: fsm.ResolveNotStarted, At: c.cfg.Now(), By: c.cfg.NodeID})
		if err == nil || !nothingWritten(err) || time.Until(deadline) < closeRetry {
			return err
		}
		c.log.Warn("closing a weight update that did not start failed; trying again", "id", id, "err", err)
		t := time.NewTimer(closeRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// nothingWritten reports whether a raft write's error says the entry was not written.
func nothingWritten(err error) bool {
	var nl *consensus.NotLeaderError
	return !errors.Is(err, consensus.ErrOutcomeUnknown) &&
		(errors.Is(err, consensus.ErrNoLeader) || errors.As(err, &nl) || errors.Is(err, consensus.ErrTimeout))
}
