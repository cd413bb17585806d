package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/bench/toolcmd"
	"github.com/meshgw/meshgw/storage"
)

// CommitResult is what `raftbench commit` prints: the latency of one raft log append on the
// disk, the step a write repeats on each node it must reach.
type CommitResult struct {
	// Nodes is the stores that append at once in each round (--stores).
	Nodes  int     `json:"nodes"`
	Writes int     `json:"writes"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
	// WritesPerSec is one round at a time.
	WritesPerSec float64 `json:"writes_per_s"`
}

// runCommit times appends of one small entry to storage.Stores under dir, each one bbolt
// transaction made durable, as raft appends a write on the leader and on each follower. With
// --stores above 1, each round appends to every store at once, as the followers of one write
// do on a machine whose gateways share a disk, and takes as long as the slowest.
func runCommit(ctx context.Context, args []string, stderr io.Writer) (*CommitResult, error) {
	fs := flag.NewFlagSet("raftbench commit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	writes := fs.Int("writes", 1000, "rounds measured (after 50 not measured)")
	stores := fs.Int("stores", 1, "stores appended to at once in each round, each in its own file")
	dir := fs.String("dir", "", "folder for the stores (required; left behind for the caller to remove)")
	if err := toolcmd.Parse(fs, args); err != nil {
		return nil, err
	}
	if *writes < 1 || *stores < 1 || *dir == "" {
		return nil, toolcmd.BadFlags{Msg: "commit needs --writes ≥ 1, --stores ≥ 1 and --dir"}
	}
	ss := make([]*storage.Store, *stores)
	for i := range ss {
		d := filepath.Join(*dir, fmt.Sprintf("store-%d", i))
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
		s, err := storage.Open(filepath.Join(d, storage.RaftDBName), storage.Options{})
		if err != nil {
			return nil, err
		}
		defer s.Close()
		ss[i] = s
	}
	lat := make([]time.Duration, 0, *writes)
	var took time.Duration
	errs := make([]error, len(ss))
	for i := range 50 + *writes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		t0 := time.Now()
		var wg sync.WaitGroup
		for j, s := range ss {
			wg.Go(func() {
				entry := &raft.Log{Index: uint64(i + 1), Term: 1, Type: raft.LogCommand, Data: make([]byte, 200)}
				errs[j] = s.StoreLogs([]*raft.Log{entry})
			})
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		if i >= 50 {
			d := time.Since(t0)
			lat, took = append(lat, d), took+d
		}
	}
	slices.Sort(lat)
	ms := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))].Microseconds()) / 1000
	}
	return &CommitResult{Nodes: len(ss), Writes: len(lat), P50Ms: ms(0.5), P99Ms: ms(0.99), MaxMs: ms(1),
		WritesPerSec: float64(len(lat)) / took.Seconds()}, nil
}
