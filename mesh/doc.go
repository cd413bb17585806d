// Package mesh is a gateway's membership in the mesh of meshgw peers: it runs hashicorp/memberlist,
// publishes this node's metadata (Meta) to its peers, keeps foreign clusters out, and tells the
// rest of meshgw who is alive, dead, left or foreign.
//
// # Membership lifecycle
//
//  1. Start. Start validates the Config, picks memberlist's timings from the profile (lan,
//     wan or local, see profile.go), installs the encryption key, and listens on TCP and UDP.
//     The node is a mesh of one, with its own metadata encoded (at most MetaMaxSize bytes).
//  2. Join. Join makes a push/pull state exchange with each given address. Both sides check
//     the other's member list (MergeDelegate): a peer with another non-empty cluster id, or
//     metadata that does not decode, makes the join fail on both sides. Once merged, gossip and
//     periodic push/pulls spread every member to every node.
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
// # What memberlist does not say
//
// memberlist v0.7.0 gives its delegates no suspect transition, and tells a graceful leave from
// a failure only inside its private state; hence Meta.Leaving, and a Status whose suspect value
// is not produced yet.
package mesh
