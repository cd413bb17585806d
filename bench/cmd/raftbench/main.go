// Command raftbench measures meshgw's raft layer for `make bench`, in one process:
//
//	raftbench cluster --nodes 3 --writes 2000 --dir D
//	    starts N consensus nodes on loopback TCP with bbolt stores under D, bootstrapped together
//	    as voters, and times sequential writes (a worker disabled and enabled again) through the
//	    leader, from Apply to the committed, applied result: the p50/p99 of an admin write's
//	    commit, without the HTTP in front of it. With --ack each write is also fleet-acknowledged
//	    (consensus.FleetAck over loopback gRPC, each node's FSM as its data plane): the consensus
//	    layer's share of a fleet-acknowledged admin write.
//	raftbench commit --writes 1000 --dir D
//	    times appends of one small entry to a raft log store under D, each made durable (one
//	    bbolt transaction): the disk's share of a write, paid once on the leader and once on a
//	    follower per raft round.
//	raftbench fill --state-dir D --node-id ID --workers 100000 --owner OTHER
//	    writes a gateway's state directory holding that many worker records, owned by OTHER (so
//	    the gateway imports them: it routes to them but runs no health checks), and snapshots
//	    it, as a long-running gateway's state would be. meshgw started on it with --node-id ID
//	    restores them; the harness times that start and weighs the workers. With
//	    --measure-at 1000,100000 (and --window, --rate, --concurrency) it also reports the CPU
//	    and wall time per write over the writes after each of those counts of records held.
//
// Both print one JSON object on stdout and exit 0, 1 on a failure, 2 on bad flags.
package main

import (
	"context"
	"io"
	"log/slog"
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
	return toolcmd.Run(ctx, "raftbench", map[string]toolcmd.Subcommand{
		"cluster": func(ctx context.Context, args []string, stderr io.Writer) (any, error) {
			return runCluster(ctx, args, stderr)
		},
		"commit": func(ctx context.Context, args []string, stderr io.Writer) (any, error) {
			return runCommit(ctx, args, stderr)
		},
		"fill": func(ctx context.Context, args []string, stderr io.Writer) (any, error) {
			return runFill(ctx, args, stderr)
		},
	}, args, stdout, stderr)
}

// quiet is the nodes' logger: warnings and errors only, to stderr.
func quiet(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
