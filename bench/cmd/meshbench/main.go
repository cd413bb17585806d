// Command meshbench measures meshgw's membership layer (package mesh) for `make bench`, in one
// process:
//
//	meshbench converge --peers 100 --profile local --runs 3 [--timeout 60s]
//	    starts N mesh nodes on 127.0.0.1 (a free port each), then every node but the first
//	    joins the first, all joins issued at once, as gateways started together with the same
//	    --join address do (a cold start of a fleet, or an orchestrator that starts every
//	    replica in parallel). It times, from the first join, until every node sees all N
//	    alive. Each run starts fresh nodes and shuts them all down.
//
//	meshbench bulletins --peers 3 --profile lan --workers 10 --trials 50 [--bound 5s] [--timeout 80s]
//	    starts and joins N nodes as converge does; node 0 owns the workers and publishes their
//	    bulletins, every other node records what its BulletinReceiver gets. Each trial flips one
//	    worker's health (ready ↔ not_ready, never twice within a coalesce window, after a
//	    random pause of up to 100 ms) and times, for every other node, the Publish until its
//	    receiver has the new health. It prints p50, p99 and max over the (trial, node) pairs, the
//	    pairs lost (not there after --bound, counted as --bound in the percentiles) and the
//	    slowest pairs.
//
//	meshbench bulletin-bytes --peers 3 --profile lan --workers 10000 --window 30s [--settle 15s] [--churn 100]
//	    node 0 publishes every worker; once every node holds them all and --settle has passed,
//	    it reads meshgw_mesh_bulletin_bytes_total of node 0 (the owner) and node 1 (a peer that
//	    imports and relays) over a window without changes, then over one with --churn health
//	    changes per second spread over the workers.
//
// Each prints one JSON object on stdout (converge: {"peers", "profile", "runs_s", "median_s",
// "max_s"}), progress on stderr, and exits 0, 1 on a failure (a join refused, no convergence or
// no bulletins before --timeout), 2 on bad flags.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/meshgw/meshgw/bench/toolcmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return toolcmd.Run(ctx, "meshbench", map[string]toolcmd.Subcommand{
		"converge": func(ctx context.Context, args []string, stderr io.Writer) (any, error) {
			return runConverge(ctx, args, stderr)
		},
		"bulletins": func(ctx context.Context, args []string, stderr io.Writer) (any, error) {
			return runBulletins(ctx, args, stderr)
		},
		"bulletin-bytes": func(ctx context.Context, args []string, stderr io.Writer) (any, error) {
			return runBulletinBytes(ctx, args, stderr)
		},
	}, args, stdout, stderr)
}
