// Command meshctl is the operator's command line over a meshgw gateway's admin API.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr, os.Getenv))
}

// Exit statuses.
const (
	exitOK      = 0
	exitRefused = 1 // the gateway refused, could not be reached, or answered nonsense; or `cert` could not write
	exitUsage   = 2 // the command line is wrong
)

// run is main without the process: it runs one command line and returns the exit status.
// getenv reads $MESHCTL_GATEWAY and $MESHCTL_ADMIN_KEY (and the --api-key-env variable).
func run(args []string, stdout, stderr io.Writer, getenv func(string) string) int {
	app := &app{stdout: stdout, getenv: getenv}
	root := app.rootCommand()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "meshctl: %s\n", oneLine(err.Error()))
	var ge gatewayError
	if errors.As(err, &ge) {
		return exitRefused
	}
	return exitUsage
}

// gatewayError marks the errors that come from the gateway's side (a refusal, no answer, an
// answer that cannot be read), and a certificate file `meshctl cert` could not write: they
// exit 1, every other error is a usage error and exits 2.
type gatewayError interface {
	error
	fromGateway()
}

// oneLine folds s onto one line, so that every error is one line on stderr.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// usageArgs wraps a cobra argument validator so that its message names the command's usage.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return fmt.Errorf("%s: %v (usage: %s)", commandName(cmd), err, cmd.UseLine())
		}
		return nil
	}
}

// needSubcommand is the RunE of a command group run without a subcommand: a usage error naming
// the group's subcommands, as every group answers it.
func needSubcommand(cmd *cobra.Command, _ []string) error {
	if !cmd.HasParent() {
		return fmt.Errorf("name a command: %s (see %s --help)", subcommands(cmd), cmd.CommandPath())
	}
	return fmt.Errorf("%s: name a subcommand: %s (see %s --help)", commandName(cmd), subcommands(cmd), cmd.CommandPath())
}

// groupArgs is the Args of a command group below meshctl: it takes no argument but a
// subcommand, and names them when given another word.
func groupArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	return fmt.Errorf("%s: unknown command %q; want one of %s (see %s --help)", commandName(cmd), args[0],
		subcommands(cmd), cmd.CommandPath())
}

// subcommands lists a group's subcommands, by name: "add, disable, enable".
func subcommands(cmd *cobra.Command) string {
	var names []string
	for _, c := range cmd.Commands() { // sorted by name; help is not available
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return strings.Join(names, ", ")
}

// commandName is the command's path without the leading "meshctl", which run prints anyway.
func commandName(cmd *cobra.Command) string {
	if !cmd.HasParent() {
		return cmd.Name()
	}
	return strings.TrimPrefix(cmd.CommandPath(), cmd.Root().Name()+" ")
}
