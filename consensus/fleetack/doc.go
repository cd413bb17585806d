// Package fleetack makes a gateway's admin writes fleet-acknowledged: a write answers once every
// live gateway routes by it, and names the gateways that did not apply it in time.
//
// It runs on every gateway, as the FleetAck gRPC service of api/consensus/v1 (registered on the
// cluster's gRPC listener) and its client side, over the node of package consensus.
//
// # Acknowledging a write
//
//  1. The write committed and the writer's gateway has its raft index (consensus.Node.Apply,
//     through a forwarder when the writer does not lead).
//  2. The leader tells its followers that it committed. Each time the leader's FSM applies an
//     entry it publishes a commit notice (consensus.Node.LeaderNotice), which it pushes on the
//     WatchApplied stream every follower keeps open to it; a follower hands the notice to raft
//     (consensus.Node.OfferNotice), and applies the entry at once instead of at raft's next
//     AppendEntries. The notices go through the Commits interface.
//  3. Each gateway's data plane applies the entry: its reconciler brings the pool up to the
//     raft state and publishes it (Applied, gateway/fleet.Reconciler). The gateway counts the
//     index as applied once the pool published it and a restart would serve it (Saved,
//     consensus.Node.WaitSaved: the commit index stored with the raft log covers it).
//  4. Every live peer pushes that index to the writer, on the WatchApplied stream the writer
//     follows to each live peer, for the writer's own writes only (consensus.Node.AppliedFor).
//     A peer whose stream says nothing for feedGrace, or that serves no stream, is also asked
//     WaitApplied.
//  5. Acknowledge waits until every live peer (alive or suspect in the mesh, this gateway
//     included) reached the index, or the timeout (--fleet-ack-timeout-secs) ends the wait. A
//     peer that the mesh declares dead or gone during the wait is waited for no longer.
//  6. The Report names who acknowledged and who lagged; a lagging write is logged at WARN and
//     counted per peer (meshgw_fleet_ack_lagging_total). Nothing is undone: a peer that lags
//     routes by the state before the write until it applies it.
//
// # Reading after a write
//
// FleetAck.Barrier is the node's read barrier (consensus.Node.ReadBarrier) over this service's
// connections: the service answers a peer's ReadIndex with the leader's read index
// (consensus.Node.ReadIndex), and the reader waits until its FSM applied it, so that what it
// reads next includes every write acknowledged before.
package fleetack
