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
	if err := toolcmd.Parse(fs, args); err != nil {
		return nil, err
	}
	if *stateDir == "" || *nodeID == "" || *workers < 0 || *owner == "" {
		return nil, toolcmd.BadFlags{Msg: "fill needs --state-dir, --node-id, --owner and --workers ≥ 0"}
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
	if err := register(ctx, node, *workers, *owner, stderr); err != nil {
		return nil, err
	}
	if err := node.Snapshot(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return nil, err
	}
	res := &FillResult{Workers: len(node.Workers()), Owner: *owner, NodeID: *nodeID,
		AppliedIndex: node.AppliedIndex(), TookS: time.Since(start).Seconds()}
	if res.Workers != *workers {
		return nil, fmt.Errorf("the state holds %d workers, not %d", res.Workers, *workers)
	}
	return res, nil
}

// register writes n worker records owned by owner, fillConcurrency at a time, printing progress
// to stderr every tenth.
func register(ctx context.Context, node *consensus.Node, n int, owner string, stderr io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next, done atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	at := time.Now()
	for range fillConcurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if _, err := apply(ctx, node, fsm.Register{Spec: fillSpec(i), Owner: owner, At: at}); err != nil {
					once.Do(func() { firstErr = fmt.Errorf("register worker %d: %w", i, err); cancel() })
					return
				}
				if d := done.Add(1); n >= 10 && d%int64(n/10) == 0 {
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
