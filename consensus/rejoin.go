package consensus

import (
	"fmt"

	"github.com/meshgw/meshgw/storage"
)

// startRejoining decides whether the node starts rejoining (voteguard.go) and stores it: a node
// without raft state that waits for a leader (--join, --bootstrap-expect) is rejoining, whether
// it joins for the first time or lost its state directory, since it cannot tell the two apart;
// a node that bootstraps itself is not; a restart keeps what was stored, so that a node
// restarted halfway through catching up still refuses votes. It also takes the incarnation of
// the state directory (a new one at every start when ephemeral).
func (n *Node) startRejoining(existing, waits bool) (bool, error) {
	db := n.stores.db
	if db == nil {
		id, err := storage.NewIncarnation()
		if err != nil {
			return false, fmt.Errorf("consensus: %w", err)
		}
		n.incarnation = id
		return !existing && waits, nil
	}
	n.incarnation = db.Incarnation()
	if existing {
		on, err := db.Rejoining()
		if err != nil {
			return false, fmt.Errorf("consensus: read the rejoining flag: %w", err)
		}
		if on {
			n.log.Warn("this node is still rejoining: it votes for nobody until a leader confirms it caught up",
				"incarnation", n.incarnation)
		}
		return on, nil
	}
	on := waits
	if err := db.SetRejoining(on); err != nil {
		return false, fmt.Errorf("consensus: store the rejoining flag: %w", err)
	}
	return on, nil
}

// Incarnation is the random id of this node's state directory, made when it was created: a
// node id that comes back with another one has forgotten its raft state.
func (n *Node) Incarnation() string { return n.incarnation }

// Rejoining reports whether the node's raft state is new and no leader has confirmed that it
// caught up yet: it then votes for nobody and asks nobody's vote, and the leader neither
// promotes it nor counts it as a live voter.
func (n *Node) Rejoining() bool { return n.guard.rejoining.Load() }

// Rejoined ends rejoining, durably, saying why: a leader confirmed that this node applied its
// commit index (CatchUp), or the node bootstraps a new cluster with peers that are all new
// (ExpectBootstrap), so no entry was ever acknowledged. It is a no-op when not rejoining.
func (n *Node) Rejoined(why string) error {
	if !n.Rejoining() {
		return nil
	}
	if db := n.stores.db; db != nil {
		if err := db.SetRejoining(false); err != nil {
			return fmt.Errorf("consensus: store the rejoining flag: %w", err)
		}
	}
	n.guard.setRejoining(false)
	n.log.Info("this node votes again", "why", why, "incarnation", n.incarnation)
	return nil
}
