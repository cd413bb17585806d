package main

import (
	"github.com/spf13/pflag"
)

// aliases registers one setting under several names, each (name, usage), that all write value:
// the setting's own name first, then the spellings SMG or its launchers use. Given on the
// command line under any name, the setting reads none of their variables, so a flag always wins
// over a variable (parseFlags). Two names given different values, as flags or through their
// variables, contradict each other: check refuses that (exit 2) rather than let one win without
// a word.
func aliases(fs *pflag.FlagSet, value pflag.Value, flags ...[2]string) *aliasSet {
	set := &aliasSet{value: value, given: map[string]string{}}
	for _, nu := range flags {
		set.flags = append(set.flags, fs.VarPF(&aliasFlag{set: set, name: nu[0]}, nu[0], "", nu[1]))
	}
	return set
}

// aliasSet is what the names of one aliases setting share.
type aliasSet struct {
	value pflag.Value
	flags []*pflag.Flag
	given map[string]string // name → the value it was given, as value prints it
	order []string          // the names given, in order
}

// check reports two names of the set given different values, each as it was given: the flag
// or its variable.
func (s *aliasSet) check() error {
	for _, a := range s.order {
		if b := s.order[0]; s.given[a] != s.given[b] {
			return usagef("%s=%s and %s=%s contradict each other (one is an alias of the other); give one of them",
				givenAs(flagNamed(s.flags, b)), s.given[b], givenAs(flagNamed(s.flags, a)), s.given[a])
		}
	}
	return nil
}

// flagNamed is the flag of flags called name.
func flagNamed(flags []*pflag.Flag, name string) *pflag.Flag {
	for _, f := range flags {
		if f.Name == name {
			return f
		}
	}
	panic("meshgw: no flag --" + name + " in its set")
}

// aliasFlag is one name of an aliases setting.
type aliasFlag struct {
	set  *aliasSet
	name string
}

func (f *aliasFlag) Set(s string) error {
	if err := f.set.value.Set(s); err != nil {
		return err
	}
	if _, ok := f.set.given[f.name]; !ok {
		f.set.order = append(f.set.order, f.name)
	}
	f.set.given[f.name] = f.set.value.String()
	for _, fl := range f.set.flags {
		fl.Changed = true
	}
	return nil
}

func (f *aliasFlag) String() string { return f.set.value.String() }

func (f *aliasFlag) namesGiven() []string { return f.set.order }

func (f *aliasFlag) Type() string { return f.set.value.Type() }

// float64Value and intValue return pflag's own value types, writing to p, for aliases, taking
// decimal finite numbers only (strictNumber), as every number flag does.
func float64Value(p *float64, def float64) pflag.Value {
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.Float64Var(p, "v", def, "")
	return strictNumber(fs.Lookup("v").Value)
}

func intValue(p *int, def int) pflag.Value {
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.IntVar(p, "v", def, "")
	return strictNumber(fs.Lookup("v").Value)
}
