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
// It prints one JSON object on stdout ({"peers", "profile", "runs_s", "median_s", "max_s"}),
// progress on stderr, and exits 0, 1 on a failure (a join refused, no convergence before
// --timeout), 2 on bad flags.
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
	}, args, stdout, stderr)
}
