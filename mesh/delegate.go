package mesh

import (
	"errors"
	"fmt"

	"github.com/hashicorp/memberlist"
)

// delegate is what memberlist calls back: the node's metadata (Delegate), membership events
// (EventDelegate), the two checks that keep foreign peers out, and the report of another address
// claiming this node's id (ConflictDelegate, conflict.go). memberlist calls the event, alive and
// conflict callbacks with its node lock held, so they only touch the mesh's own tables and never
// call back into memberlist.
//
// memberlist offers two places to refuse a peer, and both are needed (its docs say so on
// AliveDelegate):
//   - MergeDelegate.NotifyMerge sees the whole member list of the other side of a push/pull
//     made for a join, on both sides, before anything is merged. Refusing it makes the joiner's
//     Join fail (and the seed drop the joiner), so this is where a join across clusters stops
//     with an error. It is not called for the periodic push/pull anti-entropy.
//   - AliveDelegate.NotifyAlive sees each alive message, from gossip and from every push/pull
//     merge. Refusing it keeps the node out of (or, once known, its metadata from changing in)
//     the member list, so a foreign peer cannot slip in passively through a third node.
type delegate struct{ m *Mesh }

var (
	_ memberlist.Delegate         = delegate{}
	_ memberlist.EventDelegate    = delegate{}
	_ memberlist.AliveDelegate    = delegate{}
	_ memberlist.MergeDelegate    = delegate{}
	_ memberlist.ConflictDelegate = delegate{}
)

// NodeMeta returns this node's encoded metadata; EncodeMeta has kept it within limit.
func (d delegate) NodeMeta(limit int) []byte {
	raw := d.m.local.Load().raw
	if len(raw) > limit {
		return nil // cannot happen: limit is MetaMaxSize; memberlist would panic on more
	}
	return raw
}

// NotifyMsg, GetBroadcasts, LocalState and MergeRemoteState carry the bulletins (bulletins.go).
func (d delegate) NotifyMsg(b []byte) { d.m.bul.handle(b) }

func (d delegate) GetBroadcasts(overhead, limit int) [][]byte {
	msgs := d.m.queue.GetBroadcasts(overhead, limit)
	for _, b := range msgs {
		d.m.metrics.bulletins.sentBytes(len(b))
	}
	return msgs
}

func (d delegate) LocalState(join bool) []byte {
	st := d.m.bul.localState(join)
	d.m.metrics.bulletins.sentBytes(len(st))
	return st
}

func (d delegate) MergeRemoteState(buf []byte, _ bool) { d.m.bul.mergeRemote(buf) }

func (d delegate) NotifyJoin(n *memberlist.Node)        { d.m.observe(n, eventJoin) }
func (d delegate) NotifyUpdate(n *memberlist.Node)      { d.m.observe(n, eventUpdate) }
func (d delegate) NotifyLeave(n *memberlist.Node)       { d.m.observe(n, eventLeave) }
func (d delegate) NotifyAlive(n *memberlist.Node) error { return d.m.admit(n) }

// NotifyMerge refuses a join whose other side lists a peer that is foreign, or whose metadata
// does not decode. Every foreign peer is recorded, not just the first.
func (d delegate) NotifyMerge(peers []*memberlist.Node) error {
	var errs []error
	for _, p := range peers {
		if err := d.m.admit(p); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return nil
}

// admit checks a peer's metadata: it must decode, name the peer, and carry no foreign cluster
// id. A foreign peer is recorded so that Members lists it.
func (m *Mesh) admit(n *memberlist.Node) error {
	if n.Name == m.name {
		return nil
	}
	meta, err := DecodeMeta(n.Meta)
	if err != nil {
		return fmt.Errorf("peer %s: %w", n.Name, err)
	}
	if meta.NodeID != n.Name {
		return fmt.Errorf("peer %s: its metadata names node %q", n.Name, meta.NodeID)
	}
	ours := m.local.Load().meta.ClusterID
	if isForeign(ours, meta.ClusterID) {
		m.recordForeign(n, meta)
		return fmt.Errorf("peer %s is in cluster %s, this node in %s: %w", n.Name, meta.ClusterID, ours, ErrForeignCluster)
	}
	return nil
}

// recordForeign lists a refused peer as foreign, up to maxForeign of them.
func (m *Mesh) recordForeign(n *memberlist.Node, meta Meta) {
	now := m.now()
	m.mu.Lock()
	e, ok := m.foreign[n.Name]
	if !ok {
		if len(m.foreign) >= maxForeign {
			m.mu.Unlock()
			return
		}
		e = &entry{Member: Member{ID: n.Name, Status: StatusForeign, Since: now}}
		m.foreign[n.Name] = e
	}
	e.Address, e.Meta, e.seen = n.Address(), meta, now
	m.mu.Unlock()
	if !ok {
		m.log.Warn("mesh peer refused: it belongs to another cluster", "peer", n.Name, "address", n.Address(),
			"peer_cluster_id", meta.ClusterID, "cluster_id", m.local.Load().meta.ClusterID)
		m.signal()
	}
}

// event is a membership change memberlist reported.
type event int

const (
	eventJoin event = iota
	eventUpdate
	eventLeave
)

// observe records what memberlist reported about node n, logs a change of status, and signals
// the watchers.
func (m *Mesh) observe(n *memberlist.Node, ev event) {
	meta, err := DecodeMeta(n.Meta)
	if err != nil { // admit let it in, so this does not happen; keep the id
		meta = Meta{NodeID: n.Name}
	}
	now := m.now()
	m.mu.Lock()
	e, known := m.table[n.Name]
	if !known {
		e = &entry{Member: Member{ID: n.Name, Status: StatusAlive}}
		m.table[n.Name] = e
	}
	old, oldMeta := e.Status, e.Meta
	e.Address, e.Meta, e.seen = n.Address(), meta, now
	switch ev {
	case eventJoin, eventUpdate:
		e.Status = StatusAlive
		delete(m.foreign, n.Name) // it was accepted, so it is no longer foreign
	case eventLeave:
		e.Status = StatusDead
		if meta.Leaving {
			e.Status = StatusLeft
		}
	}
	changed := !known || old != e.Status
	if changed {
		e.Since = now
	}
	status := e.Status
	m.mu.Unlock()
	progressOnly := !changed && sameButProgress(oldMeta, meta)

	if changed && n.Name != m.name {
		switch status {
		case StatusDead:
			m.log.Warn("mesh peer failed", "peer", n.Name, "address", n.Address())
		default:
			m.log.Info("mesh peer "+status.String(), "peer", n.Name, "address", n.Address(), "region", meta.Region, "color", meta.Color)
		}
	}
	m.signalChange(progressOnly)
}

// sameButProgress reports whether a and b differ at most in a peer's progress: its applied
// index and owned-worker count.
func sameButProgress(a, b Meta) bool {
	a.AppliedIndex, a.OwnedWorkers = b.AppliedIndex, b.OwnedWorkers
	return a == b
}
