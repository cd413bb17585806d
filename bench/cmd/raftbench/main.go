// Command raftbench measures meshgw's raft layer for `make bench`, in one process:
//
//	raftbench cluster --nodes 3 --writes 2000 --dir D
//	    starts N consensus nodes on loopback TCP with bbolt stores under D, bootstrapped together
//	    as voters, and times sequential writes (a worker disabled and enabled again) through the
//	    leader, from Apply to the committed, applied result: the p50/p99 of an admin write's
//	    commit, without the HTTP in front of it.
//	raftbench fill --state-dir D --node-id ID --workers 100000 --owner OTHER
//	    writes a gateway's state directory holding that many worker records, owned by OTHER (so
//	    the gateway imports them: it routes to them but runs no health checks), and snapshots
//	    it, as a long-running gateway's state would be. meshgw started on it with --node-id ID
//	    restores them; the harness times that start and weighs the workers.
//
// Both print one JSON object on stdout and exit 0, 1 on a failure, 2 on bad flags.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = "usage: raftbench cluster|fill [flags]; raftbench SUBCOMMAND -h lists the flags"

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	var (
		res any
		err error
	)
	switch args[0] {
	case "cluster":
		res, err = runCluster(ctx, args[1:], stderr)
	case "fill":
		res, err = runFill(ctx, args[1:], stderr)
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "raftbench: unknown subcommand %q; %s\n", args[0], usage)
		return 2
	}
	var bad badFlags
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &bad):
		if bad.msg != "" {
			fmt.Fprintln(stderr, "raftbench:", bad.msg)
		}
		return 2
	case err != nil:
		fmt.Fprintln(stderr, "raftbench:", err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		return 1
	}
	return 0
}

// badFlags is a command line that did not parse or validate; msg is "" when the flag package
// has already said why.
type badFlags struct{ msg string }

func (b badFlags) Error() string { return b.msg }

// parse parses args into fs, mapping its errors to badFlags (or flag.ErrHelp).
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return badFlags{}
	}
	if fs.NArg() > 0 {
		return badFlags{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}

// quiet is the nodes' logger: warnings and errors only, to stderr.
func quiet(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
}
