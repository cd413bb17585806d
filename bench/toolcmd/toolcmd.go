// Package toolcmd is the command line shared by the benchmark tools that `make bench` runs
// (bench/cmd/raftbench, bench/cmd/meshbench): a subcommand per measurement, its flags, one JSON
// object on stdout, progress on stderr, and the exit status 0 (measured), 1 (the measurement
// failed) or 2 (bad command line).
package toolcmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
)

// Subcommand runs one measurement with its arguments (after the subcommand's name) and returns
// what to print as JSON. A BadFlags error exits 2, flag.ErrHelp exits 0, any other error 1.
type Subcommand func(ctx context.Context, args []string, stderr io.Writer) (any, error)

// Run dispatches args[0] to its subcommand in subs and prints the result. tool names the
// program in messages.
func Run(ctx context.Context, tool string, subs map[string]Subcommand, args []string, stdout, stderr io.Writer) int {
	names := make([]string, 0, len(subs))
	for name := range subs {
		names = append(names, name)
	}
	slices.Sort(names)
	usage := fmt.Sprintf("usage: %s %s [flags]; %s SUBCOMMAND -h lists the flags", tool, strings.Join(names, "|"), tool)
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return 2
	}
	sub, ok := subs[args[0]]
	switch {
	case args[0] == "-h" || args[0] == "--help" || args[0] == "help":
		fmt.Fprintln(stdout, usage)
		return 0
	case !ok:
		fmt.Fprintf(stderr, "%s: unknown subcommand %q; %s\n", tool, args[0], usage)
		return 2
	}
	res, err := sub(ctx, args[1:], stderr)
	var bad BadFlags
	switch {
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &bad):
		if bad.Msg != "" {
			fmt.Fprintf(stderr, "%s: %s\n", tool, bad.Msg)
		}
		return 2
	case err != nil:
		fmt.Fprintf(stderr, "%s: %v\n", tool, err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		return 1
	}
	return 0
}

// BadFlags is a command line that did not parse or validate; Msg is "" when the flag package
// has already said why.
type BadFlags struct{ Msg string }

func (b BadFlags) Error() string { return b.Msg }

// Parse parses args into fs, mapping its errors to BadFlags (or flag.ErrHelp), and refuses
// arguments left over.
func Parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return BadFlags{}
	}
	if fs.NArg() > 0 {
		return BadFlags{fmt.Sprintf("unexpected argument %q", fs.Arg(0))}
	}
	return nil
}
