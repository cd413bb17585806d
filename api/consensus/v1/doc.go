// Package consensusv1 holds the protobuf messages of meshgw's raft log entries and snapshots
// (generated from consensus.proto by scripts/proto.sh); package consensus/fsm gives them meaning.
package consensusv1
