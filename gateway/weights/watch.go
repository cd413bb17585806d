package weights

import (
	"context"
	"time"

	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/mesh"
)

// DefaultWatchInterval is how often Watch looks at the open records.
const DefaultWatchInterval = 2 * time.Second

// Members is the mesh as Watch reads it; *mesh.Mesh implements it.
type Members interface {
	Members() []mesh.Member
}

// Leader says whether this gateway leads raft; *consensus.Node implements it.
type Leader interface {
	IsLeader() bool
}

// Watch keeps the open records' status true until ctx ends, looking every interval (zero means
// DefaultWatchInterval):
//   - a running record this gateway coordinates that this process does not run (the gateway
//     restarted mid-update) becomes interrupted;
//   - on the leader, a running or interrupted record whose coordinator is dead, has left, or is
//     unknown to the mesh becomes coordinator_lost, so that no record stays open unnoticed.
//
// A failed record (fsm.JournalRecord.State: the update ended with a target not updated) is
// neither: how it ended is known.
//
// Either way the record stays open, and its targets disabled, until an operator resolves it.
func (c *Coordinator) Watch(ctx context.Context, members Members, leader Leader, interval time.Duration) {
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		c.WatchOnce(members, leader)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// WatchOnce is one look of Watch.
func (c *Coordinator) WatchOnce(members Members, leader Leader) {
	for _, j := range c.cfg.Records.Journal() {
		var action string
		switch {
		case j.Coordinator == c.cfg.NodeID && j.State() == fsm.JournalRunning && !c.Running(j.ID):
			action = fsm.ResolveInterrupted
		case (j.State() == fsm.JournalRunning || j.Status == fsm.JournalInterrupted) && j.Coordinator != c.cfg.NodeID &&
			leader.IsLeader() && gone(members, j.Coordinator):
			action = fsm.ResolveCoordinatorLost
		default:
			continue
		}
		if err := c.resolve(fsm.JournalResolve{ID: j.ID, Action: action, At: c.cfg.Now(), By: c.cfg.NodeID}); err != nil {
			c.log.Warn("marking a weight update record failed; tried again later", "id", j.ID, "status", action, "err", err)
			continue
		}
		c.log.Warn("a weight update did not finish: its record stays open and its workers disabled until an operator resolves it",
			"id", j.ID, "coordinator", j.Coordinator, "status", action, "targets", len(j.Targets))
	}
}

// gone reports whether node is dead, has left, or is not a member.
func gone(members Members, node string) bool {
	for _, m := range members.Members() {
		if m.ID == node {
			return m.Status == mesh.StatusDead || m.Status == mesh.StatusLeft
		}
	}
	return true
}
