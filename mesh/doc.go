// Package mesh is a gateway's membership in the mesh of meshgw peers: it runs hashicorp/memberlist,
// publishes this node's metadata (Meta) to its peers, keeps foreign clusters out, tells the rest
// of meshgw who is alive, dead, left or foreign, and carries the owners' worker bulletins.
//
// # Membership lifecycle
//
//  1. Start. Listen binds TCP and UDP on one port beforehand, so that a gateway finds a port in
//     use before it starts anything; Start takes that Listener (or binds itself), validates the
//     Config, picks memberlist's timings from the profile (lan, wan or local, see profile.go)
//     and installs the encryption key. The node is a mesh of one, with its own metadata encoded
//     (at most MetaMaxSize bytes).
//  2. Join. Join makes a push/pull state exchange with each given address. Both sides check
//     the other's member list (MergeDelegate): a peer with another non-empty cluster id, or
//     metadata that does not decode, makes the join fail on both sides. Once merged, gossip and
//     periodic push/pulls spread every member to every node. A peer that lists this node's id
//     alive at another address, where a process answers a ping for that id, makes Join return
//     a *NodeIDTakenError (ConflictDelegate, conflict.go): the id is another live node's. A dead
//     node's id is taken back by a node at a new address at once.
//  3. Admit. Every alive message, gossiped or merged, passes the same check (AliveDelegate), so
//     a foreign peer never enters the member list through a third node. A refused foreign peer
//     is listed by Members with StatusForeign; nothing else about it is used.
//  4. Observe. memberlist reports joins, metadata updates and deaths; the mesh keeps a table
//     of them (itself included) and signals Watch, coalesced. A death is StatusLeft when the
//     peer published Meta.Leaving before it, StatusDead otherwise. Members lists dead, left and
//     foreign peers for Config.Retention after they were last seen, then forgets them.
//  5. Update. SetMeta changes this node's metadata (applied index, owned workers, cluster id
//     once raft knows it) and gossips it with memberlist's UpdateNode, bounded by a timeout.
//  6. Leave and Shutdown. Leave publishes Meta.Leaving, then memberlist's leave message;
//     Shutdown stops every listener and goroutine. Shutdown without Leave is a crash to the
//     others: they suspect the node, then declare it dead.
//
// # Bulletins
//
//  1. Publish. An owner hands Publish each change of an owned worker's runtime state. A
//     bulletin equal to the last one published is dropped; the first change of a worker goes
//     out at once, later ones at most every Config.BulletinCoalesce (100 ms), the latest
//     winning. Each takes the owner's name and the next value of its clock (seq: a Lamport
//     counter never behind the wall clock in microseconds).
//  2. Gossip. Bulletins go into a TransmitLimitedQueue that memberlist's gossip drains
//     (GetBroadcasts); a queued bulletin of the same worker is replaced, and the queue is bounded.
//  3. Relay. A node that receives a bulletin newer than any it saw of the worker (a higher epoch,
//     or the same epoch and a higher seq) queues it again and hands it to the BulletinReceiver;
//     an older one is dropped (dropped_stale). So bulletins spread epidemically.
//  4. Beat. Every Config.BulletinBeat (1 s) an owner that ever published gossips a Beat: its
//     worker count and the XOR of a hash of (worker, seq) over what it published. Receivers
//     relay new beats and note that they heard from the owner (Heard).
//  5. Resync. A node whose own digest of an owner differs at two beats in a row asks the owner
//     (memberlist's reliable channel) for its whole state, at most every 2 s; the owner answers
//     at most once a second per requester. A whole state replaces what the node held of that
//     owner: newer bulletins are delivered, withdrawn workers forgotten.
//  6. Push/pull. A join's exchange carries the joined node's whole state; a periodic one carries
//     it within a 32 KiB average budget.
//  7. Withdraw. An owner that stops owning a worker withdraws it: it leaves the digest and the
//     state, and the next resyncs make the others forget it.
//
// # What memberlist does not say
//
// memberlist v0.7.0 gives its delegates no suspect transition, and tells a graceful leave from
// a failure only inside its private state; hence Meta.Leaving, and a Status whose suspect value
// is not produced yet.
package mesh
