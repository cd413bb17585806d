package voters

import (
	"time"

	"github.com/hashicorp/raft"
)

// Internals for the tests of package voters_test.

// WithDefaults is o with its zero fields set to their defaults.
func WithDefaults(o Options) Options { return o.withDefaults() }

// Planned is what the planner makes of a view: the voters it wants, the fleet it counts, and
// its account of the count as the log line gives it (o as given, without defaults).
func Planned(cfg raft.Configuration, peers []Peer, now time.Time, o Options) (want, fleet int, account string) {
	p := newPlanner(cfg, peers, now, o.withDefaults())
	return p.want, p.fleet, p.wanted()
}

// UnreachableRecheck is how soon a pass runs again after one that found a non-voter the
// leader's raft cannot reach.
const UnreachableRecheck = unreachableRecheck

// UnlistedPeers is peers as a Reconciler's pass hands them to Plan on cfg at time now: with
// every server of cfg that they do not list, as mesh.StatusUnknown since missing (the term's
// clocks, which it updates) first found it missing.
func UnlistedPeers(missing map[string]time.Time, cfg raft.Configuration, peers []Peer, now time.Time) []Peer {
	return unlisted(missing).peers(cfg, peers, now)
}
