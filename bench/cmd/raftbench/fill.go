package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/bench/toolcmd"
	"github.com/meshgw/meshgw/consensus"
	"github.com/meshgw/meshgw/consensus/fsm"
	"github.com/meshgw/meshgw/storage"
	"github.com/meshgw/meshgw/worker"
)

// FillResult is what `raftbench fill` prints.
type FillResult struct {
	Workers      int     `json:"workers"`
	Owner        string  `json:"owner"`
	NodeID       string  `json:"node_id"`
	AppliedIndex uint64  `json:"applied_index"`
	TookS        float64 `json:"took_s"`
	// PerWrite is the cost of a write at each --measure-at count of records held.
	PerWrite []WriteCost `json:"per_write,omitempty"`
}

// fillConcurrency is how many writes are in flight: raft batches concurrent entries into one
// append and one fsync, so the fill takes seconds rather than an fsync per worker.
const fillConcurrency = 256

func runFill(ctx context.Context, args []string, stderr io.Writer) (*FillResult, error) {
	fs := flag.NewFlagSet("raftbench fill", flag.ContinueOnError)
	fs.SetOutput(stderr)
	stateDir := fs.String("state-dir", "", "the gateway's --state-dir (required; must hold no state for --node-id yet)")
	nodeID := fs.String("node-id", "", "the gateway's --node-id (required)")
	workers := fs.Int("workers", 100_000, "worker records to write")
	owner := fs.String("owner", "elsewhere", "the node id that owns them; another gateway's, so that --node-id imports them")
	measureAt := fs.String("measure-at", "", "comma-separated record counts: measure the CPU and wall time per write of the --window writes after each")
	window := fs.Int("window", 10_000, "writes per --measure-at window (the applied state is saved once a second: let a window last a few)")
	rate := fs.Int("rate", 0, "writes started per second, paced evenly (0: as fast as they go)")
	concurrency := fs.Int("concurrency", fillConcurrency, "writes in flight (1: sequential, one fsync each)")
	if err := toolcmd.Parse(fs, args); err != nil {
		return nil, err
	}
	if *stateDir == "" || *nodeID == "" || *workers < 0 || *owner == "" || *concurrency < 1 || *rate < 0 {
		return nil, toolcmd.BadFlags{Msg: "fill needs --state-dir, --node-id, --owner, --workers ≥ 0 and --concurrency ≥ 1, --rate ≥ 0"}
	}
	costs, need, err := newCostWindows(*measureAt, *window)
	if err != nil {
		return nil, toolcmd.BadFlags{Msg: err.Error()}
	}
	if need > *workers {
		return nil, toolcmd.BadFlags{Msg: fmt.Sprintf("--measure-at and --window need --workers ≥ %d", need)}
	}
	nd, err := storage.PrepareNodeDir(*stateDir, *nodeID, quiet(stderr))
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(nd.RaftDB()); err == nil {
		return nil, fmt.Errorf("%s already holds raft state; fill writes a new state directory", nd.Path)
	}
	bind, err := freeAddr()
	if err != nil {
		return nil, err
	}
	node, err := consensus.Start(consensus.Config{NodeID: *nodeID, BindAddr: bind, StateDir: nd.Path, Logger: quiet(stderr)})
	if err != nil {
		return nil, err
	}
	defer node.Shutdown()
	if _, err := waitLeader(ctx, []*consensus.Node{node}, 15*time.Second); err != nil {
		return nil, err
	}
	start := time.Now()
	if err := register(ctx, node, *workers, *owner, pace{*concurrency, *rate}, costs, stderr); err != nil {
		return nil, err
	}
	if err := node.Snapshot(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil, err
	}
	res := &FillResult{Workers: len(node.Workers()), Owner: *owner, NodeID: *nodeID,
		AppliedIndex: node.AppliedIndex(), TookS: time.Since(start).Seconds(), PerWrite: costs.costs()}
	if res.Workers != *workers {
		return nil, fmt.Errorf("the state holds %d workers, not %d", res.Workers, *workers)
	}
	return res, nil
}

// pace is how a fill sends its writes: at most concurrency in flight, and, when rate > 0, the
// i-th not before i/rate seconds after the first.
type pace struct{ concurrency, rate int }

// wait returns once write i is due, or ctx is done.
func (p pace) wait(ctx context.Context, start time.Time, i int) {
	if p.rate <= 0 {
		return
	}
	wait := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(p.rate)))
	if wait <= 0 {
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// register writes n worker records owned by owner as p says, printing progress to stderr every
// tenth and telling costs of each write done.
func register(ctx context.Context, node *consensus.Node, n int, owner string, p pace, costs *costWindows, stderr io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next, done atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	at := time.Now()
	costs.done(0)
	for range p.concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				p.wait(ctx, at, i)
				if _, err := apply(ctx, node, fsm.Register{Spec: fillSpec(i), Owner: owner, At: at}); err != nil {
					once.Do(func() { firstErr = fmt.Errorf("register worker %d: %w", i, err); cancel() })
					return
				}
				d := done.Add(1)
				costs.done(int(d))
				if n >= 10 && d%int64(n/10) == 0 {
					fmt.Fprintf(stderr, "raftbench fill: %d of %d workers written\n", d, n)
				}
			}
		})
	}
	wg.Wait()
	return firstErr
}

// fillSpec is worker i: a distinct engine URL, one model, a region and a label, as an operator
// registers an engine through the admin API.
func fillSpec(i int) worker.Spec {
	s := worker.Spec{
		URL:    fmt.Sprintf("http://10.%d.%d.%d:30000", i>>16&255, i>>8&255, i&255),
		Model:  "meta-llama/Llama-3.1-8B-Instruct",
		Region: "us-east-1",
		Labels: map[string]string{"rack": fmt.Sprintf("r%d", i%64)},
	}
	_ = s.Normalize() // a fixed, valid shape
	return s
}
