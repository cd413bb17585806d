package mesh

import (
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/hashicorp/memberlist"
)

// NodeIDTakenError is Join's error when a live process at another address already uses this
// node's id. Its peers refuse every message of this node for as long as that one runs, logging
// "Conflicting address" each time, so this node cannot take part: Shutdown it, without Leave,
// whose message would speak for that node's name.
type NodeIDTakenError struct {
	NodeID string
	// Addr is the mesh address (host:port) of the process that holds the id.
	Addr string
}

func (e *NodeIDTakenError) Error() string {
	return fmt.Sprintf("mesh: node id %s is already used by a live peer at %s", e.NodeID, e.Addr)
}

// The process behind a conflicting address gets at least pingTries pings, for at least
// pingWait in all, to answer one: a lost datagram or a busy host must not make a live duplicate
// pass for a dead one. (Each ping waits memberlist's ProbeTimeout: 200 ms with the local
// profile, 500 ms with lan, 3 s with wan.)
const (
	pingTries = 3
	pingWait  = time.Second
)

// NotifyConflict is memberlist's report that an alive message names a node it lists at
// another address. When the name is this node's, a peer lists this node's id at another
// address: Join then checks whether a live process is there (takenBy). Conflicts between two
// other nodes are memberlist's to log. memberlist holds its node lock here: the claim is only
// recorded.
func (d delegate) NotifyConflict(existing, other *memberlist.Node) {
	if existing.Name != d.m.name || other == nil {
		return
	}
	claim := *other
	claim.Addr = slices.Clone(other.Addr)
	d.m.claim.Store(&claim)
	d.m.claims.Add(1)
}

// takenBy checks the last claim on this node's id from another address: a live process there
// answers a ping addressed to this node's name, and then the id is taken (a *NodeIDTakenError).
// A process that does not answer is this node's own previous run (a gateway restarted on a new
// address, whose peers have not declared its old one dead yet): they give the name to this
// address once they do (deadNodeReclaimTime), and takenBy returns nil.
func (m *Mesh) takenBy() error {
	claim := m.claim.Load()
	if claim == nil {
		return nil
	}
	addr := &net.UDPAddr{IP: claim.Addr, Port: int(claim.Port)}
	until := time.Now().Add(pingWait)
	for try := 0; try < pingTries || time.Now().Before(until); try++ {
		if _, err := m.ml.Ping(m.name, addr); err == nil {
			return &NodeIDTakenError{NodeID: m.name, Addr: claim.Address()}
		}
	}
	m.log.Warn("a peer lists this node's id at another address, where nothing answers: taken for this node's previous run, "+
		"which peers give up once they declare it dead", "node", m.name, "other", claim.Address())
	return nil
}
