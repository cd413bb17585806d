package main

import (
	"errors"
	"fmt"
	"io"
	"slices"
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

// usageError is a bad command line: exit 2 with its one-line message. An error about the value
// of one flag (valuef) keeps that flag apart from what is wrong with the value, so that
// parseFlags can open the message with where the value came from: the name it was given under
// (an alias's, when it was) and the variable, when it was read from one.
type usageError struct {
	flag string // the flag whose value is wrong, as registered; "" for other errors
	from string // "--name" or "$MESHGW_NAME: --name", set by parseFlags; "" means "--flag"
	msg  string // the whole message, or, with flag, what is wrong with the value
}

func (e *usageError) Error() string {
	switch {
	case e.flag == "":
		return e.msg
	case e.from != "":
		return e.from + " " + e.msg
	}
	return "--" + e.flag + " " + e.msg
}

func usagef(format string, args ...any) error { return &usageError{msg: fmt.Sprintf(format, args...)} }

// valuef is a usage error about the value of the flag name: "--name " and the formatted text.
func valuef(name, format string, args ...any) error {
	return &usageError{flag: name, msg: fmt.Sprintf(format, args...)}
}

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
		f.Value = strictNumber(f.Value)
		if !noEnv[f.Name] {
			f.Usage += " [$" + envName(f.Name) + "]"
		}
	})
	return fs
}

// parseFlags parses args, then fills every flag not given on the command line from its
// environment variable, then validates each group. errHelp means --help was asked for.
//
// The names of one setting (aliases, linkedBools) count as one flag: given on the command line
// under any name, the setting reads none of their variables, so a flag always wins over a
// variable. Otherwise each name's variable is read, and two that contradict each other are
// refused by the setting's check, as two flags are.
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
	onCommandLine := map[string]bool{}
	fs.VisitAll(func(f *pflag.Flag) { onCommandLine[f.Name] = f.Changed })
	var envErr error
	fs.VisitAll(func(f *pflag.Flag) {
		if envErr != nil || onCommandLine[f.Name] || noEnv[f.Name] {
			return
		}
		v := getenv(envName(f.Name))
		if v == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			envErr = usagef("$%s: %v", envName(f.Name), oneLine(valueError(err).Error()))
			return
		}
		_ = fs.SetAnnotation(f.Name, fromEnv, []string{envName(f.Name)})
	})
	if envErr != nil {
		return envErr
	}
	for _, g := range groups {
		if err := g.validate(); err != nil {
			return attribute(fs, err)
		}
	}
	return nil
}

// fromEnv is the annotation parseFlags puts on a flag its variable set.
const fromEnv = "meshgw-from-env"

// givenAs is how the user gave the flag f: "--name", or "$MESHGW_NAME" when its variable set it.
func givenAs(f *pflag.Flag) string {
	if v := f.Annotations[fromEnv]; len(v) > 0 {
		return "$" + v[0]
	}
	return "--" + f.Name
}

// namesGiven is a value shared by several names (aliases, linkedBools): it lists those given,
// in order.
type namesGiven interface{ namesGiven() []string }

// given lists how the setting of the flag name was given, under each of its names given
// (givenAs); none when it keeps its default.
func given(fs *pflag.FlagSet, name string) []string {
	f := fs.Lookup(name)
	if f == nil || !f.Changed {
		return nil
	}
	names := []string{name}
	if n, ok := f.Value.(namesGiven); ok {
		names = n.namesGiven()
	}
	out := make([]string, 0, len(names))
	for _, n := range names {
		out = append(out, givenAs(fs.Lookup(n)))
	}
	return out
}

// attribute opens an error about one flag's value (valuef) with the name the value was given
// under, which may be an alias's, and the variable it came from, if it did:
// "$MESHGW_CACHE_MATCH_THRESHOLD: --cache-match-threshold 2 is not in 0-1".
func attribute(fs *pflag.FlagSet, err error) error {
	var ue *usageError
	if !errors.As(err, &ue) || ue.flag == "" || fs.Lookup(ue.flag) == nil {
		return err
	}
	f := fs.Lookup(ue.flag)
	if n, ok := f.Value.(namesGiven); ok {
		if names := n.namesGiven(); len(names) > 0 && !slices.Contains(names, f.Name) {
			f = fs.Lookup(names[0])
		}
	}
	ue.from = "--" + f.Name
	if as := givenAs(f); as != ue.from {
		ue.from = as + ": --" + f.Name
	}
	return ue
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
		return valuef(name, "%d is not a port; want %d-65535", v, lo)
	}
	return nil
}

func checkMin(name string, v, lo int) error {
	if v < lo {
		return valuef(name, "%d is below the minimum %d", v, lo)
	}
	return nil
}

func checkOneOf(name, v string, allowed []string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return valuef(name, "%q is not one of %s", v, strings.Join(allowed, ", "))
}
