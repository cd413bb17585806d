// Package consensusv1 holds the protobuf messages of meshgw's raft log entries and snapshots
// (generated from consensus.proto by scripts/proto.sh), which package consensus/fsm gives
// meaning to; the Forward service (forward.proto) over which a gateway that is not the raft
// leader hands a write to the leader's --rpc-port listener, which package consensus/forward
// serves and calls; and the FleetAck service (ack.proto) of fleet acknowledgements and read
// indexes, which package consensus/fleetack serves and calls.
package consensusv1
