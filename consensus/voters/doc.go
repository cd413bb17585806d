// Package voters decides which gateways of the fleet vote in the raft group, and runs the
// leader's duty that makes the raft configuration so.
//
// It has three parts:
//
//   - The planner, Plan: a pure function from the raft configuration, the mesh's view of the
//     peers (Peer) and the time to the configuration changes (Change) that bring the one in
//     line with the other. It reads no clock and calls no raft. Its numbered rules, in its doc
//     comment, say who joins as a non-voter, who is promoted, demoted or removed and when, and
//     under which quorum guard; tests and docs cite them by number.
//   - The automatic count, AutoCount and Wanted: how many voters the leader keeps when
//     --raft-voters is 0, by the size of the fleet.
//   - The loop, Reconciler: a leader.Duty that plans on the current configuration and
//     membership and hands each change to raft, one voter change per configuration entry. Each
//     term of leadership clocks the servers of the configuration that the mesh does not list
//     from when it first finds them missing, so that the planner can tell how long each has
//     been gone (unlisted.go). It
//     reaches raft through the Raft interface (and Contact, when the node offers it), which
//     *consensus.Node implements; package consensus imports this one, not the other way round.
//
// The scenarios of testdata/*.txt drive the planner through what a fleet goes through (joins,
// drains, kills, partitions, wiped disks, stops and restarts) and hold the transcripts it
// prints; go test -run TestScenarios -rewrite writes them anew.
package voters
