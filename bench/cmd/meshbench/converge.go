package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/meshgw/meshgw/bench/toolcmd"
	"github.com/meshgw/meshgw/mesh"
)

// ConvergeResult is what `meshbench converge` prints.
type ConvergeResult struct {
	Peers   int       `json:"peers"`
	Profile string    `json:"profile"`
	RunsS   []float64 `json:"runs_s"` // each run's time from the first join to full convergence
	MedianS float64   `json:"median_s"`
	MaxS    float64   `json:"max_s"`
}

func runConverge(ctx context.Context, args []string, stderr io.Writer) (*ConvergeResult, error) {
	fs := flag.NewFlagSet("meshbench converge", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mf := addMeshFlags(fs, 100, mesh.ProfileLocal, 60*time.Second)
	runs := fs.Int("runs", 3, "runs, each with fresh nodes")
	if err := toolcmd.Parse(fs, args); err != nil {
		return nil, err
	}
	if err := mf.check(); err != nil {
		return nil, err
	}
	if *runs < 1 || *runs > 100 {
		return nil, toolcmd.BadFlags{Msg: "--runs must be 1..100"}
	}
	peers, profile, timeout := mf.peers, mf.profile, mf.timeout
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	stderr = &lockedWriter{w: stderr}
	res := &ConvergeResult{Peers: *peers, Profile: *profile}
	for i := range *runs {
		took, err := converge(ctx, *peers, *profile, stderr, mf.level)
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", i+1, err)
		}
		fmt.Fprintf(stderr, "meshbench: run %d/%d: %d peers (%s) converged in %.3f s\n", i+1, *runs, *peers, *profile, took.Seconds())
		res.RunsS = append(res.RunsS, round3(took.Seconds()))
	}
	sorted := slices.Sorted(slices.Values(res.RunsS))
	res.MedianS, res.MaxS = sorted[len(sorted)/2], sorted[len(sorted)-1]
	if len(sorted)%2 == 0 {
		res.MedianS = round3((sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2)
	}
	return res, nil
}

func round3(s float64) float64 { return float64(int64(s*1000+0.5)) / 1000 }

// lockedWriter serializes the writes of the nodes' loggers and the progress lines.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// converge starts n nodes, joins all but the first to the first at once, and returns the time
// from the first join until every node sees n alive members. It shuts every node down.
func converge(ctx context.Context, n int, profile string, stderr io.Writer, level slog.Level) (time.Duration, error) {
	c, err := startCluster(n, profile, stderr, level)
	if err != nil {
		return 0, err
	}
	defer c.shutdown()
	return c.join(ctx)
}
