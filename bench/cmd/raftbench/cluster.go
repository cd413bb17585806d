package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/bench/toolcmd"
	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/storage"
	"github.com/meshgw/meshgw/worker"
)

// ClusterResult is what `raftbench cluster` prints.
type ClusterResult struct {
	Nodes  int  `json:"nodes"`
	Writes int  `json:"writes"`
	Fsync  bool `json:"fsync"` // bbolt stores on disk, one fsync per batch of entries
	// Latencies of one write, from Apply on the leader to its applied result: the entry is
	// then on disk on a majority of the nodes and applied by the leader's FSM.
	P50Ms        float64 `json:"p50_ms"`
	P90Ms        float64 `json:"p90_ms"`
	P99Ms        float64 `json:"p99_ms"`
	MaxMs        float64 `json:"max_ms"`
	WritesPerSec float64 `json:"writes_per_s"` // sequential: one write at a time
	// Acked: each write was also fleet-acknowledged (--ack): the latency runs until every
	// node's FSM applied it, as consensus.FleetAck waits for it over gRPC.
	Acked bool `json:"acked,omitempty"`
}

func runCluster(ctx context.Context, args []string, stderr io.Writer) (*ClusterResult, error) {
	fs := flag.NewFlagSet("raftbench cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.Int("nodes", 3, "voters, all in this process on 127.0.0.1")
	writes := fs.Int("writes", 2000, "sequential writes measured (after 100 not measured)")
	dir := fs.String("dir", "", "folder for the nodes' state directories (required; left behind for the caller to remove)")
	ack := fs.Bool("ack", false, "fleet-acknowledge each write: time it until every node applied it (consensus.FleetAck over gRPC on loopback)")
	if err := toolcmd.Parse(fs, args); err != nil {
		return nil, err
	}
	if *nodes < 1 || *writes < 1 || *dir == "" {
		return nil, toolcmd.BadFlags{Msg: "cluster needs --nodes ≥ 1, --writes ≥ 1 and --dir"}
	}
	ns, err := startCluster(*nodes, *dir, stderr)
	defer func() {
		for _, n := range ns {
			_ = n.Shutdown()
		}
	}()
	if err != nil {
		return nil, err
	}
	leader, err := waitLeader(ctx, ns, 15*time.Second)
	if err != nil {
		return nil, err
	}
	var after func(index uint64) error
	if *ack {
		acks, err := startAcks(ns)
		defer acks.close()
		if err != nil {
			return nil, err
		}
		after = acks.acknowledger(leader)
	}
	lat, took, err := timeWrites(ctx, leader, *writes, after)
	if err != nil {
		return nil, err
	}
	slices.Sort(lat)
	ms := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
	}
	return &ClusterResult{
		Nodes: *nodes, Writes: *writes, Fsync: true, Acked: *ack,
		P50Ms: ms(0.50), P90Ms: ms(0.90), P99Ms: ms(0.99), MaxMs: ms(1),
		WritesPerSec: float64(*writes) / took.Seconds(),
	}, nil
}

// startCluster starts n nodes bootstrapped together as voters, on free loopback ports, with
// their stores under dir/nI. It returns the nodes it started, also on an error.
func startCluster(n int, dir string, stderr io.Writer) ([]*consensus.Node, error) {
	var servers []raft.Server
	var binds []string
	for i := range n {
		addr, err := freeAddr()
		if err != nil {
			return nil, err
		}
		binds = append(binds, addr)
		servers = append(servers, raft.Server{ID: raft.ServerID(fmt.Sprintf("n%d", i+1)), Address: raft.ServerAddress(addr), Suffrage: raft.Voter})
	}
	var ns []*consensus.Node
	for i, s := range servers {
		nd, err := storage.PrepareNodeDir(filepath.Join(dir, string(s.ID)), string(s.ID), quiet(stderr))
		if err != nil {
			return ns, err
		}
		node, err := consensus.Start(consensus.Config{
			NodeID: string(s.ID), BindAddr: binds[i], StateDir: nd.Path,
			BootstrapServers: servers, Logger: quiet(stderr),
		})
		if err != nil {
			return ns, fmt.Errorf("start node %s: %w", s.ID, err)
		}
		ns = append(ns, node)
	}
	return ns, nil
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitLeader waits until one of ns leads and is ready for writes.
func waitLeader(ctx context.Context, ns []*consensus.Node, within time.Duration) (*consensus.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, n := range ns {
			if n.IsLeader() {
				return n, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no raft leader within %s", within)
		case <-tick.C:
		}
	}
}

// timeWrites registers one worker, then disables and enables it writes times in a row (after
// 100 unmeasured), and returns each write's latency and the measured writes' total time. after,
// when set, runs after each write with its index, and counts in its latency.
func timeWrites(ctx context.Context, leader *consensus.Node, writes int, after func(uint64) error) ([]time.Duration, time.Duration, error) {
	s := worker.Spec{URL: "http://127.0.0.1:8000", Model: "bench-model"}
	if err := s.Normalize(); err != nil {
		return nil, 0, err
	}
	if _, err := apply(ctx, leader, fsm.Register{Spec: s, Owner: string(leader.ID()), At: time.Now()}); err != nil {
		return nil, 0, err
	}
	on, off := true, false
	flip := func(i int) fsm.Command {
		if i%2 == 0 {
			return fsm.SetFlags{ID: s.ID(), Flags: fsm.FlagChange{Disabled: &on, Reason: "bench", By: "raftbench", At: time.Now()}}
		}
		return fsm.SetFlags{ID: s.ID(), Flags: fsm.FlagChange{Disabled: &off}}
	}
	write := func(i int) (time.Duration, error) {
		t0 := time.Now()
		res, err := apply(ctx, leader, flip(i))
		if err == nil && after != nil {
			err = after(res.Index)
		}
		return time.Since(t0), err
	}
	for i := range 100 {
		if _, err := write(i); err != nil {
			return nil, 0, err
		}
	}
	lat := make([]time.Duration, 0, writes)
	start := time.Now()
	for i := range writes {
		d, err := write(i)
		if err != nil {
			return nil, 0, err
		}
		lat = append(lat, d)
	}
	return lat, time.Since(start), nil
}

// apply makes one write; a rejected command is an error.
func apply(ctx context.Context, n *consensus.Node, c fsm.Command) (fsm.Result, error) {
	res, err := n.Apply(ctx, c)
	if err != nil {
		return res, err
	}
	if res.Outcome == fsm.Rejected {
		return res, fmt.Errorf("write rejected: %w", res.Err)
	}
	return res, nil
}
