package voters

import (
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/mesh"
)

// unlisted is what one term of leadership remembers of the servers of the raft configuration
// that the mesh does not list: since when each has been missing, as the term's passes found it
// (Plan rules 6, 7 and 12). The mesh forgets a member its retention after it died or left, and
// the processes of a fleet started again never list a gateway that did not come back: without
// a clock such a server is one the planner knows nothing of, and a voter kept its seat, and
// its place in rule 15's count, for good.
//
// The clock of a server starts at the first pass of the term that finds it missing, not when
// it went: a new leader starts its clocks at its own start of leadership (it cannot know since
// when its predecessor missed the server), and a voter the mesh forgot waits one more grace.
// Both only delay a removal. The map lives in what Reconciler.Term returns, so it is the
// term's own.
type unlisted map[string]time.Time

// peers returns peers with, for every server of cfg that they do not list, a Peer of Status
// mesh.StatusUnknown whose Since is when this term first found it missing (now, at the first
// pass that does). It forgets the servers listed again and those no longer in cfg, so that a
// server missing once more is clocked anew.
func (u unlisted) peers(cfg raft.Configuration, peers []Peer, now time.Time) []Peer {
	listed := make(map[string]bool, len(peers))
	for _, p := range peers {
		listed[p.ID] = true
	}
	inCfg := make(map[string]bool, len(cfg.Servers))
	for _, s := range cfg.Servers {
		id := string(s.ID)
		inCfg[id] = true
		if listed[id] {
			delete(u, id)
			continue
		}
		since, ok := u[id]
		if !ok {
			since, u[id] = now, now
		}
		peers = append(peers, Peer{ID: id, Status: mesh.StatusUnknown, Since: since})
	}
	for id := range u {
		if !inCfg[id] {
			delete(u, id)
		}
	}
	return peers
}
