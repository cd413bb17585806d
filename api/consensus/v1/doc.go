// Package consensusv1 holds the protobuf messages of meshgw's raft log entries and snapshots
// (generated from consensus.proto by scripts/proto.sh), which package consensus/fsm gives
// meaning to, and the Forward service (forward.proto) over which a gateway that is not the raft
// leader hands a write to the leader's --rpc-port listener; package consensus serves and calls it.
package consensusv1
