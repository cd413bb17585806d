// Package meshv1 holds the protobuf message of a gateway's memberlist node metadata (generated
// from mesh.proto by scripts/proto.sh); package mesh encodes and validates it.
package meshv1
