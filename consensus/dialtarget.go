package consensus

import (
	"io"
	"strings"

	"github.com/hashicorp/raft"
)

// targetSep separates the address from the server id in the address targetTransport hands
// raft's NetworkTransport; no address contains it.
const targetSep = "\x00"

// withTarget is the address raft's NetworkTransport is given for server id at addr: the
// address, then the id, so that the stream layer's Dial, which gets only that address, can
// name the server in its hello. An empty id leaves addr as it is.
func withTarget(addr raft.ServerAddress, id raft.ServerID) raft.ServerAddress {
	if id == "" {
		return addr
	}
	return addr + targetSep + raft.ServerAddress(id)
}

// splitTarget undoes withTarget: the address to dial and the server id meant, "" when unknown.
func splitTarget(target raft.ServerAddress) (addr, id string) {
	addr, id, _ = strings.Cut(string(target), targetSep)
	return addr, id
}

// targetTransport is raft's TCP transport with the server id raft means to reach carried to
// the stream layer's Dial, for the hello (hello.go): raft's StreamLayer.Dial gets an address
// only, while each call raft makes names the server too. It sits right on the
// NetworkTransport, below the vote guard, since only this stream layer reads the id (an
// in-memory transport, Config.Transport, would take it for another address).
//
// The id travels inside the address rather than in a table the stream reads, because the
// NetworkTransport pools connections by that address: a pooled connection that one server
// took for its own is then never handed to another server's calls (a configuration that moved
// the address from one server to the other), and two servers at one address (a stale entry)
// cannot read each other's id.
type targetTransport struct {
	*raft.NetworkTransport
}

// AppendEntriesPipeline implements raft.Transport.
func (t targetTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	return t.NetworkTransport.AppendEntriesPipeline(id, withTarget(target, id))
}

// AppendEntries implements raft.Transport.
func (t targetTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest,
	resp *raft.AppendEntriesResponse) error {
	return t.NetworkTransport.AppendEntries(id, withTarget(target, id), args, resp)
}

// RequestVote implements raft.Transport.
func (t targetTransport) RequestVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestVoteRequest,
	resp *raft.RequestVoteResponse) error {
	return t.NetworkTransport.RequestVote(id, withTarget(target, id), args, resp)
}

// RequestPreVote implements raft.WithPreVote.
func (t targetTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest,
	resp *raft.RequestPreVoteResponse) error {
	return t.NetworkTransport.RequestPreVote(id, withTarget(target, id), args, resp)
}

// InstallSnapshot implements raft.Transport.
func (t targetTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest,
	resp *raft.InstallSnapshotResponse, data io.Reader) error {
	return t.NetworkTransport.InstallSnapshot(id, withTarget(target, id), args, resp, data)
}

// TimeoutNow implements raft.Transport.
func (t targetTransport) TimeoutNow(id raft.ServerID, target raft.ServerAddress, args *raft.TimeoutNowRequest,
	resp *raft.TimeoutNowResponse) error {
	return t.NetworkTransport.TimeoutNow(id, withTarget(target, id), args, resp)
}
