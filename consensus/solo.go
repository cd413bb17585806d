package consensus

import (
	"time"

	"github.com/hashicorp/raft"
)

// electAloneAtOnce makes a node whose configuration has one voter, itself, elect itself now
// rather than after raft's heartbeat timeout (1 to 2 s by default): a gateway that starts alone
// leads at once, so that gateways joining it are added and promoted from their first second.
// The outcome is the one raft reaches at the end of the timeout anyway, since no other voter
// exists to lead; only the wait goes.
//
// raft has no call for it. A follower whose heartbeat timeout is lowered (ReloadConfig) fires
// its timer at once, and a node that never heard from a leader then starts an election; the
// timeout is set back right after. A configuration whose heartbeat timeout cannot be lowered
// (it equals LeaderLeaseTimeout) keeps raft's wait. It reports whether it asked.
func electAloneAtOnce(r *raft.Raft, self raft.ServerID, leaderLease time.Duration) bool {
	f := r.GetConfiguration()
	if f.Error() != nil || !soleVoter(f.Configuration(), self) {
		return false
	}
	was := r.ReloadableConfig()
	lowered := was
	lowered.HeartbeatTimeout = max(leaderLease, 5*time.Millisecond)
	if lowered.HeartbeatTimeout >= was.HeartbeatTimeout {
		return false
	}
	if err := r.ReloadConfig(lowered); err != nil {
		return false
	}
	return r.ReloadConfig(was) == nil
}

// soleVoter reports whether self is the one voter of cfg.
func soleVoter(cfg raft.Configuration, self raft.ServerID) bool {
	voters := 0
	for _, s := range cfg.Servers {
		if s.Suffrage == raft.Voter {
			if s.ID != self {
				return false
			}
			voters++
		}
	}
	return voters == 1
}
