package consensus

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/hashicorp/raft"
)

// ErrHasState is returned by BootstrapWith when the node already has raft state: a
// configuration, a log or a snapshot. Nothing was changed.
var ErrHasState = errors.New("consensus: this node already has raft state; it does not bootstrap again")

// HasState reports whether this node has raft state: a configuration (bootstrapped, restored,
// or received from a leader that added it) or any log entry. A node started with Config.Join or
// Config.BootstrapExpect and no state has none until a leader reaches it or BootstrapWith runs.
func (n *Node) HasState() bool {
	if n.closed.Load() {
		return true // nothing more to bootstrap
	}
	if n.raft.LastIndex() > 0 {
		return true
	}
	f := n.raft.GetConfiguration()
	return f.Error() != nil || len(f.Configuration().Servers) > 0
}

// BootstrapWith bootstraps a new cluster whose voters are servers (this node must be one of
// them): the --bootstrap-expect step, once the gateway sees that many peers without state. It
// is meant to run on one node only, the one of lowest id (DESIGN.md section 3, as Consul): the
// others, with no configuration, grant it their votes and receive the configuration from it as
// their leader. The list is sorted by id, so that two proposers with the same view propose the
// identical configuration, which raft accepts. It fails with ErrHasState when the node has
// state already.
func (n *Node) BootstrapWith(servers []raft.Server) error {
	if n.closed.Load() {
		return ErrShutdown
	}
	self := raft.ServerID(n.cfg.NodeID)
	if !slices.ContainsFunc(servers, func(s raft.Server) bool { return s.ID == self }) {
		return fmt.Errorf("consensus: bootstrap servers do not include this node %s", self)
	}
	if n.HasState() {
		return ErrHasState
	}
	servers = slices.Clone(servers)
	slices.SortFunc(servers, func(a, b raft.Server) int { return cmp.Compare(a.ID, b.ID) })
	for i := range servers {
		servers[i].Suffrage = raft.Voter
		if servers[i].ID == self {
			servers[i].Address = n.trans.LocalAddr()
		}
	}
	err := n.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	if errors.Is(err, raft.ErrCantBootstrap) {
		return ErrHasState // a leader reached the node in between
	}
	if err != nil {
		return fmt.Errorf("consensus: bootstrap: %w", err)
	}
	ids := make([]string, len(servers))
	for i, s := range servers {
		ids[i] = string(s.ID)
	}
	n.log.Info("bootstrapped a new raft cluster (--bootstrap-expect)", "voters", ids)
	return nil
}

// Progress returns raft's commit index as this node knows it (on a follower, what the leader's
// last message said, bounded by the follower's log) and the last index raft handed to the FSM.
// Both count every log entry, configuration changes included, unlike AppliedIndex.
func (n *Node) Progress() (commit, applied uint64) {
	return n.raft.CommitIndex(), n.raft.AppliedIndex()
}
