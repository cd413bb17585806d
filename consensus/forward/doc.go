// Package forward takes a gateway's raft writes to the leader, from whichever gateway they
// reach: a Forwarder applies a write on its own node when that node leads, and otherwise sends
// the encoded entry over gRPC to the leader's Forward service (Register), following NotLeader
// answers a bounded number of times and re-sending a write whose attempt ended without the
// leader's answer once a newer leader is known (resend.go says why a re-send is safe).
//
// It stands on the node through Node (consensus.Node implements it): the node's id, the
// leader it knows, and ApplyEntry, which proposes an encoded entry on behalf of the gateway
// that sent it. Where forwarding sits in a write, and what each answer means for the write, is
// consensus's contract (consensus/doc.go: "Command lifecycle" and "Unknown outcomes").
package forward
