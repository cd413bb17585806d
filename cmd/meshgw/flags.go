package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/pflag"
)

// envPrefix is prepended to a flag's upper-cased name (dashes become underscores) to form the
// environment variable it also reads; the flag wins over the variable.
const envPrefix = "MESHGW_"

// flagGroup is one subsystem's flags: it registers them and validates their values. Later steps
// add their groups (health, breaker, mesh, raft, state dir) in their own files and list them in
// groups().
type flagGroup interface {
	register(fs *pflag.FlagSet)
	validate() error
}

// errVersion means --version was asked for: print the version and exit 0.
var errVersion = errors.New("--version")

// noEnv are the flags no environment variable sets: they ask for something other than a run.
var noEnv = map[string]bool{"version": true}

// usageError is a bad command line: exit 2 with its one-line message.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// newFlagSet registers every group's flags, appending to each usage line the variable it reads.
func newFlagSet(groups []flagGroup) *pflag.FlagSet {
	fs := pflag.NewFlagSet("meshgw", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	for _, g := range groups {
		g.register(fs)
	}
	fs.Bool("version", false, "print the version, commit and Go version, then exit")
	fs.VisitAll(func(f *pflag.Flag) {
		if !noEnv[f.Name] {
			f.Usage += " [$" + envName(f.Name) + "]"
		}
	})
	return fs
}

// parseFlags parses args, then fills every flag not given on the command line from its
// environment variable, then validates each group. errHelp means --help was asked for.
func parseFlags(fs *pflag.FlagSet, groups []flagGroup, args []string, getenv func(string) string) error {
	if err := fs.Parse(spreadValues(args)); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return err
		}
		return usagef("%v", oneLine(valueError(err).Error()))
	}
	if v, _ := fs.GetBool("version"); v {
		return errVersion
	}
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q; every setting is a --flag", fs.Arg(0))
	}
	var envErr error
	fs.VisitAll(func(f *pflag.Flag) {
		if envErr != nil || f.Changed || noEnv[f.Name] {
			return
		}
		v := getenv(envName(f.Name))
		if v == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			envErr = usagef("$%s: %v", envName(f.Name), oneLine(valueError(err).Error()))
		}
	})
	if envErr != nil {
		return envErr
	}
	for _, g := range groups {
		if err := g.validate(); err != nil {
			return err
		}
	}
	return nil
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// printHelp writes every flag with its default and the variable it reads.
func printHelp(w io.Writer, fs *pflag.FlagSet) {
	fmt.Fprintf(w, "meshgw: an OpenAI-compatible gateway for fleets of LLM inference workers\n\nUsage:\n  meshgw [flags]\n\nFlags (each also reads $%s<NAME>; the flag wins):\n%s", envPrefix, fs.FlagUsages())
}

// Range checks shared by the groups.

func checkPort(name string, v int, allowZero bool) error {
	lo := 1
	if allowZero {
		lo = 0
	}
	if v < lo || v > 65535 {
		return usagef("--%s %d is not a port; want %d-65535", name, v, lo)
	}
	return nil
}

func checkMin(name string, v, lo int) error {
	if v < lo {
		return usagef("--%s %d is below the minimum %d", name, v, lo)
	}
	return nil
}

func checkOneOf(name, v string, allowed []string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return usagef("--%s %q is not one of %s", name, v, strings.Join(allowed, ", "))
}
