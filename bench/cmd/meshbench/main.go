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
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

const usage = "usage: meshbench converge [flags]; meshbench converge -h lists the flags"

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
	case "converge":
		res, err = runConverge(ctx, args[1:], stderr)
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "meshbench: unknown subcommand %q; %s\n", args[0], usage)
		return 2
	}
	var bad badFlags
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &bad):
		if bad.msg != "" {
			fmt.Fprintln(stderr, "meshbench:", bad.msg)
		}
		return 2
	case err != nil:
		fmt.Fprintln(stderr, "meshbench:", err)
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
