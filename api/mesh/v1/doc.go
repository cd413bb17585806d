// Package meshv1 holds the protobuf messages of the mesh (generated from mesh.proto and
// outcome.proto by scripts/proto.sh): a gateway's memberlist node metadata, which package mesh
// encodes and validates, and the Outcomes service, which package mesh/outcome sends and serves.
package meshv1
