package main

import (
	"github.com/spf13/pflag"
)

// aliases registers one setting under several names, each (name, usage), that all write value:
// the setting's own name first, then the spellings SMG or its launchers use. Once any of them is
// given, on the command line or through its variable, the environment fills none of the
// others, so a flag always wins over a variable. Two of them given different values contradict
// each other: check refuses that (exit 2) rather than let the last one win without a word.
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

// check reports two names of the set given different values.
func (s *aliasSet) check() error {
	for _, a := range s.order {
		if b := s.order[0]; s.given[a] != s.given[b] {
			return usagef("--%s=%s and --%s=%s contradict each other (one is an alias of the other); give one of them",
				b, s.given[b], a, s.given[a])
		}
	}
	return nil
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

func (f *aliasFlag) Type() string { return f.set.value.Type() }

// float64Value and intValue return pflag's own value types, writing to p, for aliases.
func float64Value(p *float64, def float64) pflag.Value {
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.Float64Var(p, "v", def, "")
	return fs.Lookup("v").Value
}

func intValue(p *int, def int) pflag.Value {
	fs := pflag.NewFlagSet("", pflag.ContinueOnError)
	fs.IntVar(p, "v", def, "")
	return fs.Lookup("v").Value
}
