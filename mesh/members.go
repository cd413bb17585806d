package mesh

import (
	"slices"
	"strings"
	"time"
)

// Status is what this node knows of a peer. It is the one peer status of meshgw: consensus
// (the voter reconciler) and ownership (failover) read it too.
type Status int

// The statuses of a member, as `meshctl peers` shows them. The zero value is not a status: a
// consumer treats it like StatusSuspect (nothing is decided on it).
const (
	// StatusAlive: the peer answers memberlist's probes (directly or through others).
	StatusAlive Status = iota + 1
	// StatusSuspect: a probe failed and the peer has a suspicion timeout to refute it.
	// memberlist v0.7.0 reports no suspect transition to its delegates, so Members does not
	// produce it yet: a suspect peer is listed as alive until memberlist declares it dead.
	StatusSuspect
	// StatusDead: memberlist declared the peer failed (suspicion timed out, or a peer told it so)
	// without a graceful leave.
	StatusDead
	// StatusLeft: the peer left gracefully (Leave).
	StatusLeft
	// StatusForeign: the peer carries another raft cluster id than this node. It is never merged;
	// it is listed only if it was seen at all.
	StatusForeign
	// StatusUnknown: the mesh does not list the peer (it never saw it, or forgot it after
	// Config.Retention). Members never returns it; a consumer that looks for a peer and misses
	// it does (ownership's failover, with the time it first missed it).
	StatusUnknown
)

// statuses lists every Status that Members returns, in the order of their values.
var statuses = [...]Status{StatusAlive, StatusSuspect, StatusDead, StatusLeft, StatusForeign}

// String returns the status as the admin API and meshctl spell it.
func (s Status) String() string {
	switch s {
	case StatusAlive:
		return "alive"
	case StatusSuspect:
		return "suspect"
	case StatusDead:
		return "dead"
	case StatusLeft:
		return "left"
	case StatusForeign:
		return "foreign"
	case StatusUnknown:
		return "unknown"
	}
	return "invalid"
}

// Member is one node of the mesh as this node sees it (itself included).
type Member struct {
	ID      string // the node id (memberlist name)
	Address string // memberlist's host:port
	Status  Status
	Meta    Meta      // the last metadata the peer published
	Since   time.Time // when this node last saw the status change
}

// entry is a member in the table: what memberlist's events said, before the foreign check.
type entry struct {
	Member
	// seen is when the entry was last confirmed (an event, or a refused alive message for a
	// foreign peer); dead, left and foreign entries are dropped Retention after it.
	seen time.Time
}

// isForeign reports whether a peer with cluster id theirs is foreign to a node with ours: both
// are known and they differ. A node that does not know its cluster id yet (a fresh gateway
// joining a mesh) accepts everyone, and everyone accepts it.
func isForeign(ours, theirs string) bool {
	return ours != "" && theirs != "" && ours != theirs
}

// memberList builds the sorted list Members returns from the table of memberlist's events and
// the table of refused (foreign) peers, as a node whose cluster id is clusterID sees them. A
// refused peer is foreign with the metadata it was refused for.
func memberList(table, foreign map[string]*entry, clusterID string) []Member {
	out := make([]Member, 0, len(table)+len(foreign))
	for id, e := range table {
		m := e.Member
		f := foreign[id]
		if f != nil {
			// Merged before, refused since: its last alive message announced another cluster,
			// which memberlist (still holding the old metadata) does not show.
			m.Meta = f.Meta
		}
		m.Status = statusOf(e, f, clusterID)
		out = append(out, m)
	}
	for id, e := range foreign {
		if _, ok := table[id]; !ok {
			out = append(out, e.Member)
		}
	}
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// statusOf is the status of table entry e, given its entry f among the refused peers (nil if it
// was never refused), as a node whose cluster id is clusterID sees it.
func statusOf(e, f *entry, clusterID string) Status {
	if f != nil || isForeign(clusterID, e.Meta.ClusterID) {
		return StatusForeign
	}
	return e.Status
}

// prune drops the entries of peers that are gone (dead, left, or foreign) and were last seen
// more than retention before now. It reports whether it dropped any.
func prune(table map[string]*entry, now time.Time, retention time.Duration) bool {
	dropped := false
	for id, e := range table {
		switch e.Status {
		case StatusDead, StatusLeft, StatusForeign:
			if now.Sub(e.seen) > retention {
				delete(table, id)
				dropped = true
			}
		}
	}
	return dropped
}

// counts returns how many members have each status, indexed by the status.
func counts(ms []Member) [StatusUnknown + 1]int {
	var n [StatusUnknown + 1]int
	for _, m := range ms {
		if m.Status > 0 && int(m.Status) < len(n) {
			n[m.Status]++
		}
	}
	return n
}
