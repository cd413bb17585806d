package main

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	"google.golang.org/grpc"

	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fleetack"
	"github.com/meshgw/meshgw/mesh"
)

// acks serves fleetack.FleetAck on loopback gRPC for each node of a raftbench cluster, each
// node's data plane being its FSM (consensus.Node.WaitApplied), so that `cluster --ack` times the consensus
// layer's share of a fleet-acknowledged write without the gateway around it.
type acks struct {
	nodes   []*consensus.Node
	fa      []*fleetack.FleetAck
	servers []*grpc.Server
}

// startAcks starts one FleetAck per node; close stops what it started, also on an error.
func startAcks(ns []*consensus.Node) (*acks, error) {
	a := &acks{nodes: ns}
	addrs := make(map[string]string, len(ns))
	members := staticMembers{}
	var lns []net.Listener
	for _, n := range ns {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return a, err
		}
		lns = append(lns, ln)
		addrs[n.ID()] = ln.Addr().String()
		members = append(members, mesh.Member{ID: n.ID(), Status: mesh.StatusAlive})
	}
	resolve := func(id string) (string, bool) { addr, ok := addrs[id]; return addr, ok }
	for i, n := range ns {
		fa, err := fleetack.New(n, fleetack.Options{Local: n, Members: members,
			ResolveRPC: resolve, Timeout: 5 * time.Second, Logger: quiet(nil)})
		if err != nil {
			return a, err
		}
		s := grpc.NewServer()
		fa.Register(s)
		go func() { _ = s.Serve(lns[i]) }()
		a.fa, a.servers = append(a.fa, fa), append(a.servers, s)
	}
	return a, nil
}

// acknowledger returns the function that fleet-acknowledges a write on the leader's FleetAck,
// as the admin API does for a write the leader took, and fails when a node lagged.
func (a *acks) acknowledger(leader *consensus.Node) func(uint64) error {
	fa := a.fa[slices.Index(a.nodes, leader)]
	return func(index uint64) error {
		if rep := fa.Acknowledge(context.Background(), index); len(rep.Lagging) > 0 {
			return fmt.Errorf("index %d: nodes %v lagged", index, rep.Lagging)
		}
		return nil
	}
}

func (a *acks) close() {
	for _, fa := range a.fa {
		_ = fa.Close()
	}
	for _, s := range a.servers {
		s.Stop()
	}
}

// staticMembers is a mesh where every node is alive.
type staticMembers []mesh.Member

func (m staticMembers) Members() []mesh.Member { return m }

func (staticMembers) Watch() (<-chan struct{}, func()) { return make(chan struct{}), func() {} }
