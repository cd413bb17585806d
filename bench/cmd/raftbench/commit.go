package main

import (
	"context"
	"flag"
	"io"
	"path/filepath"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/meshgw/meshgw/bench/toolcmd"
	"github.com/meshgw/meshgw/storage"
)

// CommitResult is what `raftbench commit` prints: the latency of one raft log append on the
// disk, the step a write repeats on each node it must reach.
type CommitResult struct {
	Writes int     `json:"writes"`
	P50Ms  float64 `json:"p50_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MaxMs  float64 `json:"max_ms"`
	// WritesPerSec is one append at a time.
	WritesPerSec float64 `json:"writes_per_s"`
}

// runCommit times appends of one small entry to a storage.Store under dir, each one bbolt
// transaction made durable, as raft appends a write on the leader and on each follower.
func runCommit(ctx context.Context, args []string, stderr io.Writer) (*CommitResult, error) {
	fs := flag.NewFlagSet("raftbench commit", flag.ContinueOnError)
	fs.SetOutput(stderr)
	writes := fs.Int("writes", 1000, "appends measured (after 50 not measured)")
	dir := fs.String("dir", "", "folder for the store (required; left behind for the caller to remove)")
	if err := toolcmd.Parse(fs, args); err != nil {
		return nil, err
	}
	if *writes < 1 || *dir == "" {
		return nil, toolcmd.BadFlags{Msg: "commit needs --writes ≥ 1 and --dir"}
	}
	s, err := storage.Open(filepath.Join(*dir, storage.RaftDBName), storage.Options{})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	entry := &raft.Log{Term: 1, Type: raft.LogCommand, Data: make([]byte, 200)}
	lat := make([]time.Duration, 0, *writes)
	var took time.Duration
	for i := range 50 + *writes {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		entry.Index = uint64(i + 1)
		t0 := time.Now()
		if err := s.StoreLogs([]*raft.Log{entry}); err != nil {
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
	return &CommitResult{Writes: len(lat), P50Ms: ms(0.5), P99Ms: ms(0.99), MaxMs: ms(1), WritesPerSec: float64(len(lat)) / took.Seconds()}, nil
}
